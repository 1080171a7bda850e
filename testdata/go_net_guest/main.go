// A Go network guest for detrun: a net/http server on 127.0.0.1:0 and an
// http.Client in the same process doing 20 sequential GETs and 10
// concurrent GETs from goroutines; a raw TCP echo (net.Dial) and a UDP
// exchange (net.ListenUDP / net.DialUDP).  Results are printed sorted, so
// the output is the same on any schedule, natively too.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
)

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "go_net_guest: %s: %v\n", what, err)
	os.Exit(1)
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("listen", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/item/", func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/item/")
		fmt.Fprintf(w, "item %s ok", id)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	base := "http://" + ln.Addr().String()
	client := &http.Client{}

	var mu sync.Mutex
	bodyBytes := 0
	get := func(path string) (string, error) {
		resp, err := client.Get(base + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		mu.Lock()
		bodyBytes += len(body)
		mu.Unlock()
		return fmt.Sprintf("%d %s", resp.StatusCode, body), nil
	}

	var results []string
	for i := 0; i < 20; i++ {
		r, err := get(fmt.Sprintf("/item/s%02d", i))
		if err != nil {
			fail("sequential get", err)
		}
		results = append(results, "seq "+r)
	}

	var wg sync.WaitGroup
	var errs []error
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := get(fmt.Sprintf("/item/c%02d", i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			results = append(results, "conc "+r)
		}(i)
	}
	wg.Wait()
	if len(errs) > 0 {
		fail("concurrent get", errs[0])
	}
	sort.Strings(results)
	for _, r := range results {
		fmt.Println("response:", r)
	}
	fmt.Printf("responses: %d\n", len(results))
	fmt.Printf("total body bytes: %d\n", bodyBytes)
	client.CloseIdleConnections()
	srv.Close()

	tcpEcho()
	udpExchange()
	fmt.Println("done")
}

// tcpEcho: a line-echo server on 127.0.0.1:0 and one client (net.Dial)
// sending 5 lines and reading each echo.
func tcpEcho() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("tcp listen", err)
	}
	done := make(chan int)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			fail("tcp accept", err)
		}
		n, _ := io.Copy(c, c)
		c.Close()
		done <- int(n)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		fail("tcp dial", err)
	}
	rd := bufio.NewReader(c)
	for i := 0; i < 5; i++ {
		msg := fmt.Sprintf("tcp line %d", i)
		if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
			fail("tcp write", err)
		}
		line, err := rd.ReadString('\n')
		if err != nil {
			fail("tcp read", err)
		}
		fmt.Printf("tcp echo: %s", line)
	}
	c.(*net.TCPConn).CloseWrite()
	if _, err := rd.ReadByte(); err != io.EOF {
		fail("tcp eof", err)
	}
	c.Close()
	fmt.Printf("tcp server echoed %d bytes\n", <-done)
	ln.Close()
}

// udpExchange: a UDP server (net.ListenUDP) answering each datagram with
// "pong <payload>", and a connected client (net.DialUDP) sending 5 pings.
func udpExchange() {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 0})
	if err != nil {
		fail("udp listen", err)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return // closed
			}
			if _, err := srv.WriteToUDP(append([]byte("pong "), buf[:n]...), from); err != nil {
				fail("udp reply", err)
			}
		}
	}()
	c, err := net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		fail("udp dial", err)
	}
	buf := make([]byte, 1500)
	for i := 0; i < 5; i++ {
		if _, err := c.Write([]byte(fmt.Sprintf("ping %d", i))); err != nil {
			fail("udp write", err)
		}
		n, err := c.Read(buf)
		if err != nil {
			fail("udp read", err)
		}
		fmt.Printf("udp: %s\n", buf[:n])
	}
	c.Close()
	srv.Close()
}

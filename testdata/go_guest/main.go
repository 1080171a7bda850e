// A Go guest for detrun: 50 goroutines on the Go scheduler (several Ms and
// Ps, timers via the netpoller/futexes) send results on one channel; main
// prints a digest of the arrival order, the goroutine count, the time and a
// time-seeded random number.  Under detrun all of it is the same each run
// with one seed.
package main

import (
	"fmt"
	"math/rand"
	"runtime"
	"time"
)

type result struct {
	id, iter int
	acc      uint64
}

func main() {
	const workers = 50
	const iters = 100
	ch := make(chan result, 16)
	for g := 0; g < workers; g++ {
		go func(id int) {
			acc := uint64(id) + 1
			for i := 0; i < iters; i++ {
				for k := 0; k < 200; k++ { // a little work
					acc = acc*6364136223846793005 + 1442695040888963407
				}
				if i%10 == 0 {
					time.Sleep(time.Millisecond)
				}
				ch <- result{id, i, acc}
			}
		}(g)
	}
	var digest uint64 = 14695981039346656037
	var first []int
	for n := 0; n < workers*iters; n++ {
		r := <-ch
		digest = (digest ^ uint64(r.id*1000+r.iter)) * 1099511628211
		digest ^= r.acc >> 32
		if len(first) < 10 {
			first = append(first, r.id)
		}
	}
	// The senders have all sent; give them a moment to return.
	for i := 0; i < 100 && runtime.NumGoroutine() > 1; i++ {
		time.Sleep(time.Millisecond)
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	fmt.Printf("received: %d\n", workers*iters)
	fmt.Printf("first: %v\n", first)
	fmt.Printf("digest: %016x\n", digest)
	fmt.Printf("goroutines: %d\n", runtime.NumGoroutine())
	fmt.Printf("unix: %d\n", time.Now().Unix())
	fmt.Printf("rand: %d\n", rng.Int63())
}

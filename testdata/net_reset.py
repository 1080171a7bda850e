# TCP echo between two processes; under --net-reset both ends see the
# reset at a seed-determined message.
import socket, os, sys
l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()
pid = os.fork()
if pid == 0:
    s, _ = l.accept()
    try:
        while True:
            d = s.recv(100)
            if not d: break
            s.sendall(d)
    except OSError as e:
        print("server:", e.strerror, flush=True)
    os._exit(0)
c = socket.create_connection(l.getsockname())
try:
    for i in range(60):
        c.sendall(b"msg %d" % i)
        r = c.recv(100)
        if not r:
            print("client: eof at", i); break
    else:
        print("client: all 60 echoed")
except OSError as e:
    print("client:", e.strerror, "at", i)
c.close(); os.waitpid(pid, 0)

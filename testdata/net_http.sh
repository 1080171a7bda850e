#!/bin/sh
# net_http.sh DIR [localhost]: Python's http.server on 127.0.0.1:8765 serving
# DIR, in the background (its output goes to stderr), and a urllib client
# that retries (0.1 s apart, at most 100 tries) until the server answers,
# then prints "status 200" and the body of /hello.txt; an HTTP error status
# fails at once. With a second argument `localhost` the client asks for
# http://localhost:8765/hello.txt instead (name resolution through
# /etc/hosts; localhost may resolve to ::1 first, where nothing listens).
# Then the server is killed and reaped; exit 0 when the body was fetched.
set -e
dir=${1:?usage: net_http.sh DIR [localhost]}
host=127.0.0.1
if [ "${2:-}" = localhost ]; then
    host=localhost
fi
python3 -m http.server 8765 --bind 127.0.0.1 --directory "$dir" >&2 &
pid=$!
status=0
python3 - "http://$host:8765/hello.txt" <<'PY' || status=$?
import sys, time, urllib.error, urllib.request

url = sys.argv[1]
for attempt in range(100):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = r.read().decode()
            status = r.status
        break
    except urllib.error.HTTPError as e:
        print("HTTP error", e.code, "from", url)
        sys.exit(1)
    except OSError:
        time.sleep(0.1)
else:
    print("no answer from", url)
    sys.exit(1)
print("status", status)
sys.stdout.write(body)
PY
kill "$pid"
wait "$pid" 2>/dev/null || true
exit "$status"

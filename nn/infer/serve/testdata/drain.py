# Sends SIGTERM to cmd/serve and, a second later, GET /v2/health/ready and an
# inference request (issue 35): python3 drain.py ./serve [delay-seconds]
import subprocess, sys, time, os, http.client, signal, json
binary = sys.argv[1]
port = 20000 + os.getpid() % 1000
p = subprocess.Popen([binary, '-addr', f'127.0.0.1:{port}'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(100):
    try:
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=1); c.request('GET', '/v2/health/ready'); c.getresponse().read(); break
    except Exception: time.sleep(0.1)
p.send_signal(signal.SIGTERM)
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)
out = {}
for path, method in [('/v2/health/ready', 'GET'), ('/v2/models/resnet20-sparse/infer', 'POST')]:
    try:
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=2); c.request(method, path, body=b'{"inputs":[]}' if method == 'POST' else None)
        r = c.getresponse(); r.read(); out[path] = [r.status, r.getheader('Retry-After')]
    except Exception as e:
        out[path] = repr(e)[:60]
p.wait(timeout=40)
print(json.dumps({'binary': os.path.basename(binary), 'after SIGTERM +1s': out, 'exit': p.returncode}))

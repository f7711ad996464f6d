# Measures the peak RSS (VmHWM) of a cmd/serve binary while it answers the
# audit of issue 35's hostile protocol requests of 8 MiB (case: outputs,
# inputs, inputs6 = six at once, valid6 = six 64-image requests):
#   python3 hostile_rss.py ./serve CASE BUDGET|default
# It kills the server at 3 GB of RSS.
import subprocess, sys, time, threading, http.client, os, json, signal
binary, case, budget = sys.argv[1], sys.argv[2], sys.argv[3]
port = 18000 + os.getpid() % 1000
args = [binary, '-addr', f'127.0.0.1:{port}']
if budget != 'default':
    args += ['-memory-budget', budget]
p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
def status(key):
    try:
        for line in open(f'/proc/{p.pid}/status'):
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    except FileNotFoundError:
        return 0
    return 0
for _ in range(100):
    try:
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=1); c.request('GET', '/v2/health/ready'); c.getresponse().read(); break
    except Exception:
        time.sleep(0.1)
base = status('VmRSS')
LIMIT = 8 << 20
def body(case):
    if case == 'outputs':
        head = '{"inputs":[{"name":"input","shape":[64,3,32,32],"datatype":"FP32","data":[' + ','.join(['0'] * (64 * 3072)) + ']}],"outputs":['
        elem = '{"name":"probabilities"}'
        n = (LIMIT - len(head) - 2) // (len(elem) + 1)
        return (head + ','.join([elem] * n) + ']}').encode()
    if case in ('valid', 'valid6'):
        return ('{"inputs":[{"name":"input","shape":[64,3,32,32],"datatype":"FP32","data":[' + ','.join(['0.5'] * (64 * 3072)) + ']}],"outputs":[{"name":"probabilities"},{"name":"top_k","parameters":{"classification":10}}]}').encode()
    if case in ('inputs', 'inputs6'):
        n = (LIMIT - 14) // 3
        return ('{"inputs":[' + ','.join(['{}'] * n) + ']}').encode()
b = body(case)
killed = False
stop = False
def watch():
    global killed
    while not stop:
        if status('VmRSS') > (3 << 30):
            killed = True; p.kill(); return
        time.sleep(0.02)
threading.Thread(target=watch, daemon=True).start()
results = []
def send():
    try:
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
        t = time.time()
        c.request('POST', '/v2/models/resnet20-sparse/infer', body=b, headers={'Content-Type': 'application/json'})
        r = c.getresponse(); data = r.read()
        results.append((r.status, len(data), round(time.time() - t, 2), data[:150].decode(errors='replace')))
    except Exception as e:
        results.append(('error', repr(e)[:100]))
ts = [threading.Thread(target=send) for _ in range(6 if case.endswith('6') else 1)]
[t.start() for t in ts]; [t.join() for t in ts]
peak = status('VmHWM')
stop = True
if not killed:
    p.send_signal(signal.SIGTERM); p.wait(timeout=60)
print(json.dumps({'binary': os.path.basename(binary), 'case': case, 'budget': budget, 'body_bytes': len(b), 'rss_idle_MB': round(base/1e6,1), 'peak_rss_MB': round(peak/1e6,1) if not killed else '>3000 (killed)', 'results': results[:2]}))

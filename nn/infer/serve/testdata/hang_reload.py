# Replaces a served model file (cmd/serve, -model m=FILE) by a FIFO, a symlink
# to /dev/zero, a directory and a 1 GB file, and asks POST .../load after each
# (issue 35): python3 hang_reload.py ./serve  (needs resnet20-sparse.safetensors
# of nn/pretrained/models in /tmp/h35/)
import subprocess, sys, time, os, json, http.client, shutil, signal
binary = sys.argv[1]
d = f'/tmp/h35/hang-{os.getpid()}'; os.makedirs(d)
path = d + '/m.safetensors'
shutil.copy('/tmp/h35/resnet20-sparse.safetensors', path)
port = 19000 + os.getpid() % 1000
p = subprocess.Popen([binary, '-addr', f'127.0.0.1:{port}', '-model', 'm=' + path, '-drain-timeout', '3s'], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
for _ in range(100):
    try:
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=1); c.request('GET', '/v2/health/ready'); c.getresponse().read(); break
    except Exception: time.sleep(0.1)
def load(timeout=8):
    t = time.time()
    try:
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout); c.request('POST', '/v2/repository/models/m/load')
        r = c.getresponse(); b = r.read(); return (r.status, round(time.time() - t, 2), b[:120].decode())
    except Exception as e:
        return ('no answer', round(time.time() - t, 2), repr(e)[:60])
def hwm():
    for line in open(f'/proc/{p.pid}/status'):
        if line.startswith('VmHWM'): return int(line.split()[1]) // 1024
out = {}
for case in ['fifo', 'devzero', 'dir', 'big1GB']:
    if os.path.isdir(path) and not os.path.islink(path): os.rmdir(path)
    elif os.path.lexists(path): os.remove(path)
    if case == 'fifo': os.mkfifo(path)
    if case == 'devzero': os.symlink('/dev/zero', path)
    if case == 'dir': os.mkdir(path)
    if case == 'big1GB':
        with open(path, 'wb') as f: f.truncate(10**9)
    r = load()
    # then a good file
    if os.path.isdir(path) and not os.path.islink(path): os.rmdir(path)
    else: os.remove(path)
    shutil.copy('/tmp/h35/resnet20-sparse.safetensors', path)
    r2 = load()
    out[case] = {'bad load': r, 'next good load': r2[:2], 'VmHWM_MB': hwm()}
    if r[0] == 'no answer': break
t = time.time(); p.send_signal(signal.SIGTERM)
try: rc = p.wait(timeout=40)
except Exception: p.kill(); rc = 'killed'
out['SIGTERM'] = {'exit': rc, 'seconds': round(time.time() - t, 2)}
print(json.dumps({'binary': os.path.basename(binary), **out}, indent=None))

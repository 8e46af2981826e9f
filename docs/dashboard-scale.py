#!/usr/bin/env python3
"""Measures the dashboard with 10,000 nodes (README "Performance").

Usage: start a server (`mco server --data-dir /tmp/scale --listen 127.0.0.1:17999`), then
`python3 docs/dashboard-scale.py [N]`: creates N nodes (default 10,000) through POST /api/v1/nodes,
starts chromedriver, opens the nodes and pool views in headless chromium and prints the times
the page measures with performance.now(). Needs chromium and chromedriver (Debian packages).
"""
import http.client, json, subprocess, sys, threading, time, urllib.request

SERVER = ('127.0.0.1', 17999)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000


def create(lo, hi):
    c = http.client.HTTPConnection(*SERVER)
    for i in range(lo, hi):
        body = json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i:05d}", "labels": {
            "node-role.kubernetes.io/worker": "", "topology.kubernetes.io/zone": f"zone-{i % 3}"}}})
        c.request('POST', '/api/v1/nodes', body, {'Content-Type': 'application/json', 'X-Mco-Actor': 'scale'})
        r = c.getresponse()
        r.read()
        if r.status >= 300 and r.status != 409:
            print('create', i, r.status)


t = time.time()
threads = [threading.Thread(target=create, args=(k * N // 4, (k + 1) * N // 4)) for k in range(4)]
[x.start() for x in threads]
[x.join() for x in threads]
print('created', N, 'nodes in', round(time.time() - t, 1), 's')
port=19515
drv=subprocess.Popen(['chromedriver',f'--port={port}'],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
def call(method, path, body=None):
    req=urllib.request.Request(f'http://127.0.0.1:{port}{path}', method=method, data=json.dumps(body).encode() if body is not None else None, headers={'Content-Type':'application/json'})
    return json.load(urllib.request.urlopen(req))['value']
for _ in range(100):
    try: call('GET','/status'); break
    except Exception: time.sleep(0.1)
try:
    s=call('POST','/session',{"capabilities":{"alwaysMatch":{"goog:chromeOptions":{"binary":"/usr/bin/chromium","args":["--headless=new","--no-sandbox","--disable-gpu","--disable-dev-shm-usage","--window-size=1400,1000"]}}}})['sessionId']
    ex=lambda js: call('POST',f'/session/{s}/execute/sync',{"script":js,"args":[]})
    def wait(js, t=120):
        d=time.time()+t
        while time.time()<d:
            v=ex(js)
            if v: return v
            time.sleep(0.05)
        raise SystemExit('timeout '+js)
    base='http://%s:%d' % SERVER + '/ui/'
    t=time.time(); call('POST',f'/session/{s}/url',{"url":base+'#/nodes'})
    v=wait("const t=document.getElementById('timing'); return t && t.dataset.updateMs && t.textContent.includes('" + f"{N} nodes" + "') && t.textContent")
    print('nodes view:', v, '| wall from navigation', round(time.time()-t,2),'s')
    # a live update: one node patched through the API; the view re-sorts and redraws
    import urllib.request as u
    ups=[]
    for k in range(5):
        before=ex("return document.getElementById('timing').textContent")
        req=u.Request('http://%s:%d' % SERVER + '/api/v1/nodes/node-00042',method='PATCH',data=json.dumps({"metadata":{"labels":{"scale-test":str(k)}}}).encode(),headers={'Content-Type':'application/merge-patch+json'})
        u.urlopen(req).read()
        wait("return document.getElementById('timing').textContent !== "+json.dumps(before)+" || document.getElementById('timing').dataset.n !== undefined")
        ups.append(ex("return document.getElementById('timing').dataset.updateMs"))
    print('live update of one node, table update (ms):', ups)
    # typing in the filter: one input event over 10,000 nodes
    r=[]
    for q in ['node-0','node-01','node-012','node-0123','']:
        r.append(ex(f"const i=document.querySelector('.paged input[type=search]'); i.value={json.dumps(q)}; const t0=performance.now(); i.dispatchEvent(new Event('input')); return [performance.now()-t0, document.querySelector('.paged').dataset.renderMs]"))
    print('filter keystrokes (ms, total / draw):', [[round(a,1),b] for a,b in r])
    # next page
    r=[ex("const b=[...document.querySelectorAll('.paged button')].find(b=>b.textContent.startsWith('Next')); const t0=performance.now(); b.click(); return performance.now()-t0") for _ in range(5)]
    print('next page clicks (ms):', [round(x,1) for x in r])
    # pool view with 10,000 nodes
    t=time.time(); ex("location.hash='#/pool/worker'; return 1")
    wait("return document.querySelector('#waiting') && document.querySelectorAll('.paged tbody tr').length===50")
    v=ex("const t0=performance.now(); const i=document.querySelector('.paged input[type=search]'); i.value='node-00'; i.dispatchEvent(new Event('input')); return performance.now()-t0")
    print('pool view ready in', round(time.time()-t,2),'s; filter in pool view', round(v,1),'ms')
    print('heap MB', ex("return performance.memory ? Math.round(performance.memory.usedJSHeapSize/1e6) : null"))
    print('errors', ex("return window.__errors"))
finally:
    try: call('DELETE',f'/session/{s}')
    except Exception: pass
    drv.kill()

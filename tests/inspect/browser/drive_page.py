#!/usr/bin/python3
"""Drives headless Chromium over the DevTools protocol through a page `minivit attention` wrote.

    drive_page.py --chromium /usr/bin/chromium --dir ATTENTION_DIR [--gallery GALLERY_DIR] --screenshot OUT.png

Loads ATTENTION_DIR/index.html from file://, clicks patches with real mouse events, turns the
rollout controls, and checks what the page draws (window.minivitExplorer.shown() and the tile
canvas pixels) against attention.npy, rollout.npy and grad_rollout.npy read with numpy. Any
console error or warning, uncaught exception or error log entry fails the run. Exit status 0 and
"browser test: N checks passed" on success; 1 with one line per failure on stderr otherwise.
"""
import argparse
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import numpy as np
import websocket

TIMEOUT = 20.0  # seconds for every wait


class Failure(Exception):
    """A problem that stops the run (the browser cannot be driven any further)."""


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = []

    def check(self, ok, message):
        if ok:
            self.passed += 1
        else:
            self.failed.append(message)
            print(f"FAIL: {message}", file=sys.stderr, flush=True)
        return ok


class Browser:
    """One headless Chromium with one page target, spoken to over a websocket."""

    def __init__(self, chromium):
        self.profile = tempfile.mkdtemp(prefix="minivit-chromium-")
        self.log = open(os.path.join(self.profile, "chromium.log"), "w+b")
        args = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
                "--remote-allow-origins=*", f"--user-data-dir={self.profile}", "--window-size=1400,1000",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage",
                "--mute-audio", "--hide-scrollbars", "--force-device-scale-factor=1", "about:blank"]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.ws = None
        self.next_id = 0
        self.events = []
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + TIMEOUT
        while not (os.path.exists(port_file) and open(port_file).read().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise Failure(f"chromium did not open a DevTools port ({self.tail()})")
            time.sleep(0.1)
        port = int(open(port_file).read().split("\n")[0])
        page = None
        while page is None:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=TIMEOUT) as r:
                page = next((t for t in json.load(r) if t.get("type") == "page"), None)
            if page is None:
                if time.monotonic() > deadline:
                    raise Failure("chromium shows no page target")
                time.sleep(0.1)
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=TIMEOUT)
        for domain in ("Runtime", "Page", "Log"):
            self.call(f"{domain}.enable")

    def tail(self):
        self.log.seek(0)
        return self.log.read()[-600:].decode("utf-8", "replace").strip().replace("\n", " | ")

    def close(self):
        try:
            if self.ws:
                self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)  # chromium and the helpers it started
                self.proc.wait(5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(5)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _receive(self, deadline):
        self.ws.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            return json.loads(self.ws.recv())
        except websocket.WebSocketTimeoutException:
            return None

    def call(self, method, **params):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = self._receive(deadline)
            if msg is None:
                continue
            if msg.get("id") == mid:
                if "error" in msg:
                    raise Failure(f"{method}: {msg['error'].get('message')}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise Failure(f"{method}: no answer in {TIMEOUT:.0f} s")

    def wait_event(self, method, since):
        """Waits for event `method` at or after position `since` of the event list."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            for e in self.events[since:]:
                if e["method"] == method:
                    return e
            if time.monotonic() > deadline:
                raise Failure(f"no {method} in {TIMEOUT:.0f} s")
            msg = self._receive(deadline)
            if msg is not None and "method" in msg:
                self.events.append(msg)

    def pump(self, seconds=0.2):
        """Collects the events that arrive within `seconds` (late console messages)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msg = self._receive(deadline)
            if msg is not None and "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise Failure(f"evaluating {expression[:60]!r}: {d.get('exception', {}).get('description') or d.get('text')}")
        return r["result"].get("value")

    def navigate(self, url):
        mark = len(self.events)
        r = self.call("Page.navigate", url=url)
        if r.get("errorText"):
            raise Failure(f"cannot open {url}: {r['errorText']}")
        self.wait_event("Page.loadEventFired", mark)
        self.pump(0.3)
        return mark

    def problems(self, since):
        """One line per console error/warning, uncaught exception or error log entry."""
        out = []
        for e in self.events[since:]:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                out.append(f"console.{p['type']}: {text}")
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append(f"uncaught exception: {d.get('exception', {}).get('description') or d.get('text')}")
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                entry = p["entry"]
                out.append(f"log error ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".strip())
        return out

    def click(self, x, y):
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            extra = {} if kind == "mouseMoved" else {"button": "left", "clickCount": 1}
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    def key(self, name, code):
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=name, code=name, windowsVirtualKeyCode=code)

    def screenshot(self, path):
        """The full page: the viewport is stretched to the content for the capture."""
        metrics = self.call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        width, height = int(np.ceil(size["width"])), int(np.ceil(size["height"]))
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        try:
            shot = self.call("Page.captureScreenshot", format="png")
        finally:
            self.call("Emulation.clearDeviceMetricsOverride")
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))


# ---- numpy references -----------------------------------------------------------------------

def rollout_matrix(att, cls, fusion, ratio):
    """The rollout of src/inspect/attention_maps.cpp, written independently in numpy."""
    L, H, T, _ = att.shape
    first = 1 if cls else 0
    joint = np.eye(T)
    for layer in att.astype(np.float64):
        fused = {"mean": layer.mean(0), "max": layer.max(0), "min": layer.min(0)}[fusion].astype(np.float32)
        flat = fused.reshape(-1)
        cand = (np.arange(T)[:, None] * T + np.arange(first, T)[None, :]).reshape(-1)
        k = min(cand.size, int(np.floor(ratio * cand.size)))
        if ratio > 0 and k > 0:
            order = np.lexsort((cand, flat[cand]))  # by value, ties by position
            flat[cand[order[:k]]] = 0
        a = fused.astype(np.float64) + np.eye(T)
        a /= a.sum(1, keepdims=True)
        joint = a @ joint
    return joint


def readout_row(mat, cls, token, pool_weights=None):
    """Row `token` of a (T, T) matrix over the patch columns; token -1: the mean of all rows,
    or with sequence pooling the rows weighted by its pooling weights (pool_weights.npy)."""
    first = 1 if cls else 0
    if token != -1:
        return mat[token][first:].astype(np.float64)
    if pool_weights is None:
        return mat.mean(0)[first:].astype(np.float64)
    return (pool_weights.reshape(-1).astype(np.float64) @ mat.astype(np.float64))[first:]


def entropy(w):
    w = np.maximum(np.asarray(w, np.float64), 0)
    if not w.sum() > 0:
        return 0.0
    p = w / w.sum()
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def max_diff(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float("inf") if a.shape != b.shape else float(np.abs(a - b).max(initial=0.0))


# ---- the checks ----------------------------------------------------------------------------

PIXELS_JS = """(() => {
  const out = {};
  for (const cv of document.querySelectorAll('canvas[data-layer][data-head]')) {
    const G = %d, c = cv.width / G, d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data, px = [];
    for (let n = 0; n < G * G; n++) {
      const x = Math.floor((n %% G + 0.5) * c), y = Math.floor((Math.floor(n / G) + 0.5) * c), i = 4 * (y * cv.width + x);
      px.push([d[i], d[i + 1], d[i + 2]]);
    }
    out[cv.dataset.layer + ',' + cv.dataset.head] = px;
  }
  return out;
})()"""


class PageTest:
    def __init__(self, browser, checks, folder):
        self.b, self.c = browser, checks
        self.att = np.load(os.path.join(folder, "attention.npy")).astype(np.float32)
        L, H, T, T2 = self.att.shape
        self.L, self.H, self.T = L, H, T
        grad_path, roll_path = (os.path.join(folder, f) for f in ("grad_rollout.npy", "rollout.npy"))
        self.grad = np.load(grad_path) if os.path.exists(grad_path) else None
        pool_path = os.path.join(folder, "pool_weights.npy")
        self.pool_weights = np.load(pool_path) if os.path.exists(pool_path) else None
        self.roll = np.load(roll_path) if os.path.exists(roll_path) else None
        checks.check(self.grad is not None, f"{grad_path} is missing")
        self.matrices = {}

    def shown(self):
        return self.b.evaluate("window.minivitExplorer.shown()")

    def setup(self):
        s = self.shown()
        self.cls = s["cls_weight"] is not None
        self.first = 1 if self.cls else 0
        self.N = self.T - self.first
        self.G = int(round(self.N ** 0.5))
        self.c.check(self.G * self.G == self.N, f"attention.npy has {self.T} tokens: not {'1 + ' if self.cls else ''}a square of patches")
        return s

    def rollout_ref(self, fusion, ratio, token):
        key = (fusion, ratio)
        if key not in self.matrices:
            self.matrices[key] = rollout_matrix(self.att, self.cls, fusion, ratio)
        return readout_row(self.matrices[key], self.cls, token, self.pool_weights)

    def check_state(self, s, token, where):
        c = self.c
        if not c.check(s["token"] == token, f"{where}: page shows token {s['token']}, expected {token}"):
            return
        a = self.att.astype(np.float64)
        want = np.stack([[readout_row(a[l, h], self.cls, token, self.pool_weights) for h in range(self.H)]
                         for l in range(self.L)])
        c.check(max_diff(s["attention"], want) <= 1e-6,
                f"{where}: tile values differ from attention.npy[l, h, {token}] by {max_diff(s['attention'], want):.3g}")
        ent = [[entropy(want[l, h]) for h in range(self.H)] for l in range(self.L)]
        c.check(max_diff(s["entropy"], ent) <= 1e-6, f"{where}: entropies differ by {max_diff(s['entropy'], ent):.3g}")
        if self.cls:
            cw = a[:, :, token, 0]
            c.check(max_diff(s["cls_weight"], cw) <= 1e-6, f"{where}: CLS weights differ by {max_diff(s['cls_weight'], cw):.3g}")
        else:
            c.check(s["cls_weight"] is None, f"{where}: cls_weight shown without a CLS token")
        ref = self.rollout_ref(s["fusion"], s["discard"], token)
        c.check(max_diff(s["rollout"], ref) <= 1e-5,
                f"{where}: rollout (fusion {s['fusion']}, discard {s['discard']}) differs from numpy by {max_diff(s['rollout'], ref):.3g}")
        self.check_pixels(want, where)

    def check_pixels(self, want, where):
        """The hottest (coldest) cell of each drawn tile sits at the row's max (min), ties tolerated."""
        px = self.b.evaluate(PIXELS_JS % self.G)
        self.c.check(len(px) == self.L * self.H, f"{where}: found {len(px)} tile canvases, expected {self.L * self.H}")
        bad = []
        for l in range(self.L):
            for h in range(self.H):
                cells = px.get(f"{l},{h}")
                if cells is None:
                    continue
                lum = np.asarray(cells, np.float64) @ np.array([0.2126, 0.7152, 0.0722])
                w = want[l, h]
                tol = (w.max() - w.min()) * 4 / 255 + 1e-12  # colour quantisation
                hot, cold = int(np.argmax(lum)), int(np.argmin(lum))
                if w[hot] < w.max() - tol or w[cold] > w.min() + tol:
                    bad.append(f"layer {l} head {h}: hottest cell {hot} (argmax {int(np.argmax(w))}), coldest {cold} (argmin {int(np.argmin(w))})")
        self.c.check(not bad, f"{where}: tile pixels disagree with the values: " + "; ".join(bad[:3]))

    def patch_centre(self, patch):
        r = self.b.evaluate("(() => { const r = document.getElementById('image-canvas').getBoundingClientRect();"
                            " return [r.left, r.top, r.width, r.height]; })()")
        left, top, width, height = r
        row, col = divmod(patch, self.G)
        return left + (col + 0.5) * width / self.G, top + (row + 0.5) * height / self.G

    def scroll_top(self):
        self.b.evaluate("window.scrollTo(0, 0)")

    def set_controls(self, fusion, ratio):
        self.b.evaluate(f"""(() => {{
          const f = document.getElementById('fusion'), d = document.getElementById('discard');
          f.value = {json.dumps(fusion)}; f.dispatchEvent(new Event('input', {{bubbles: true}}));
          f.dispatchEvent(new Event('change', {{bubbles: true}}));
          d.value = {json.dumps(str(ratio))}; d.dispatchEvent(new Event('input', {{bubbles: true}}));
          d.dispatchEvent(new Event('change', {{bubbles: true}}));
        }})()""")

    def run(self, screenshot):
        b, c = self.b, self.c
        s = self.setup()
        readout = 0 if self.cls else -1
        self.check_state(s, readout, "default selection")
        if self.grad is not None:
            d = max_diff(s["grad_rollout"], self.grad.reshape(-1))
            c.check(d <= 1e-6, f"grad rollout shown differs from grad_rollout.npy by {d:.3g}")
        if self.pool_weights is not None:
            d = max_diff(s["pool_weights"], self.pool_weights.reshape(-1))
            c.check(d == 0, f"pooling weights shown differ from pool_weights.npy by {d:.3g}")
        else:
            c.check(s["pool_weights"] is None, "pooling weights shown for a model without sequence pooling")
        if self.roll is not None:
            d = max_diff(s["rollout"], self.roll.reshape(-1))
            c.check(d <= 1e-5, f"default rollout (fusion {s['fusion']}, discard {s['discard']}) differs from rollout.npy by {d:.3g}")
        patches = sorted({0, self.G - 1, self.N // 2, self.N - 1})  # first, end of row 0, middle, last
        for i, patch in enumerate(patches):
            self.scroll_top()
            b.click(*self.patch_centre(patch))
            token = patch + self.first
            self.check_state(self.shown(), token, f"after clicking patch {patch}")
            if i == 0:
                self.set_controls("max", 0.5)
                s2 = self.shown()
                c.check(s2["fusion"] == "max" and s2["discard"] == 0.5,
                        f"the controls set fusion {s2['fusion']}, discard {s2['discard']}, expected max, 0.5")
                self.check_state(s2, token, f"patch {patch} with fusion max, discard 0.5")
            if patch == self.N // 2:
                b.screenshot(screenshot)
                c.check(os.path.getsize(screenshot) > 1000, f"screenshot {screenshot} is empty")
        # Hovering previews a patch; leaving the image goes back to the pinned one.
        self.scroll_top()
        b.call("Input.dispatchMouseEvent", type="mouseMoved", x=self.patch_centre(self.G)[0], y=self.patch_centre(self.G)[1])
        c.check(self.shown()["token"] == self.G + self.first, f"hovering patch {self.G} does not preview it")
        b.call("Input.dispatchMouseEvent", type="mouseMoved", x=1, y=1)
        c.check(self.shown()["token"] == self.N - 1 + self.first, "leaving the image does not go back to the pinned patch")
        # An arrow key moves the pinned patch one column to the left.
        b.key("ArrowLeft", 37)
        self.check_state(self.shown(), self.N - 2 + self.first, "after ArrowLeft from the last patch")
        # The readout button brings back the CLS token (or all tokens, pooled as the head pools them).
        button = "btn-cls" if self.cls else "btn-pool" if self.pool_weights is not None else "btn-mean"
        r = b.evaluate(f"(() => {{ const e = document.getElementById('{button}'); if (!e) return null;"
                       " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
                       " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        if c.check(r is not None, f"no #{button} button"):
            b.click(*r)
            self.check_state(self.shown(), readout, f"after clicking #{button}")


def check_problems(browser, checks, since, where):
    problems = browser.problems(since)
    for p in problems:
        checks.check(False, f"{where}: {p}")
    if not problems:
        checks.check(True, "")


def gallery_test(browser, checks, gallery, screenshot):
    index = os.path.join(gallery, "index.html")
    if not checks.check(os.path.exists(index), f"{index} is missing"):
        return
    mark = browser.navigate("file://" + urllib.parse.quote(index))
    check_problems(browser, checks, mark, "gallery")
    hrefs = browser.evaluate("Array.from(document.querySelectorAll('a.gallery-item'), a => a.getAttribute('href'))")
    checks.check(len(hrefs) >= 1, "the gallery has no a.gallery-item link")
    base, ext = os.path.splitext(screenshot)
    browser.screenshot(f"{base}-gallery{ext or '.png'}")
    targets = []
    for href in hrefs:
        path = os.path.normpath(os.path.join(gallery, urllib.parse.unquote(urllib.parse.urlsplit(href).path)))
        if checks.check(os.path.isfile(path), f"gallery link {href!r}: {path} does not exist"):
            targets.append(path)
    for path in targets[:5]:
        mark = browser.navigate("file://" + urllib.parse.quote(path))
        ok = browser.evaluate("typeof window.minivitExplorer === 'object' && window.minivitExplorer !== null")
        checks.check(ok, f"{path}: window.minivitExplorer is not defined")
        check_problems(browser, checks, mark, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--dir", required=True, help="a folder written by minivit attention")
    ap.add_argument("--gallery", help="a folder whose index.html links to attention pages (a.gallery-item)")
    ap.add_argument("--screenshot", required=True, help="PNG to write (and PNG-gallery.png with --gallery)")
    args = ap.parse_args()
    checks = Checks()
    browser = None
    try:
        folder = os.path.abspath(args.dir)
        test = PageTest(None, checks, folder)
        browser = Browser(args.chromium)
        test.b = browser
        mark = browser.navigate("file://" + urllib.parse.quote(os.path.join(folder, "index.html")))
        deadline = time.monotonic() + TIMEOUT
        while not browser.evaluate("typeof window.minivitExplorer === 'object' && window.minivitExplorer !== null"):
            if time.monotonic() > deadline:
                raise Failure(f"window.minivitExplorer not defined {TIMEOUT:.0f} s after loading the page: "
                              + "; ".join(browser.problems(mark)))
            time.sleep(0.1)
        test.run(os.path.abspath(args.screenshot))
        browser.pump(0.3)
        check_problems(browser, checks, mark, "attention page")
        if args.gallery:
            gallery_test(browser, checks, os.path.abspath(args.gallery), os.path.abspath(args.screenshot))
    except Exception as e:  # one line, whatever broke; chromium is stopped below all the same
        checks.check(False, f"{type(e).__name__}: {e}")
    finally:
        if browser is not None:
            browser.close()
    if checks.failed:
        print(f"browser test: {len(checks.failed)} of {checks.passed + len(checks.failed)} checks failed", file=sys.stderr)
        return 1
    print(f"browser test: {checks.passed} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

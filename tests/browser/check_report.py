#!/usr/bin/env python3
"""Check an HTML report in a real, headless Chromium.

Usage:
    python3 tests/browser/check_report.py REPORT.html --screenshot OUT.png [--browser PATH]
        [--sweep]

--sweep checks a sweep report (dqntrader report SWEEP_DIR) instead of a run
report.

The browser is driven through the Chrome DevTools Protocol over
--remote-debugging-pipe (fd 3: commands to the browser, fd 4: replies; each
message is JSON followed by a NUL byte). Python standard library only.

Exit status:
    0   every check passed (a JSON summary is printed on stdout)
    1   at least one check failed (each failure is printed on stderr)
    2   bad command line
    77  no Chromium binary found (a failure, exit 1, when
        DQNTRADER_REQUIRE_BROWSER=1)

See README.md next to this file for the contract the report has to meet.
"""

import argparse
import base64
import errno
import fcntl
import json
import math
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from itertools import accumulate
import operator

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_SKIP = 77

DEFAULT_TIMEOUT_S = 60.0
WINDOW_W, WINDOW_H = 1280, 900
MAX_SHOT_H = 16000  # Chromium cannot composite much taller surfaces

# chart id -> series the chart must hold (None: histogram of rect.bar)
CHARTS = {
    "chart-equity": ("policy", "buy-and-hold", "flat", "sign-of-ofi"),
    "chart-drawdown": ("policy", "buy-and-hold", "flat", "sign-of-ofi"),
    "chart-position": ("policy",),
    "chart-returns": None,
    "chart-loss": ("value",),
    "chart-mean-q": ("value",),
    "chart-epsilon": ("value",),
    "chart-validation-sharpe": ("value",),
    "chart-epoch-seconds": ("value",),
}
MIN_SERIES_POINTS = 2
MIN_SERIES_WIDTH_FRACTION = 0.5
MIN_BARS = 5
MIN_NONZERO_BARS = 3
MIN_METRIC_ROWS = 15
REQUIRED_METRICS = ("sharpe", "sortino", "max_drawdown", "calmar", "total_return")
ALLOWED_SCHEMES = ("file:", "data:")

# Screenshot analysis.
NOTICEABLE = 24            # max channel difference that counts as "differs"
MIN_INK_FRACTION = 0.01    # share of a figure's pixels that must differ
STROKE_TOLERANCE = 40      # max channel difference to a series' stroke colour
MIN_STROKE_PIXELS = 20     # pixels of that colour the series must leave
MIN_STROKE_SEPARATION = 48  # any two equity strokes must differ this much
EQUITY_SERIES = CHARTS["chart-equity"]

# Sweep report (--sweep): fixed charts; one chart-setting-<name> per swept setting besides.
SWEEP_MEMBER_CHART = "chart-member-sharpe"
SWEEP_EQUITY_CHART = "chart-best-equity"
SWEEP_EQUITY_SERIES = ("best member", "buy-and-hold")
SWEEP_SETTING_PREFIX = "chart-setting-"
SWEEP_POINT_SERIES = ("members", "best")
MIN_MEMBER_PATHS = 2
MIN_LEADERBOARD_ROWS = 2
MIN_COMBINATION_ROWS = 1
# Leaderboard columns; the swept settings sit between "seed" and "status".
LEADERBOARD_COLUMNS = ("rank", "member", "seed", "status", "best epoch", "validation Sharpe",
                       "total return", "max drawdown", "test Sharpe")
NO_RUN_STATUSES = ("pending", "failed")  # members the report reads no epochs of
POINT_SLACK_PX = 0.5       # a point's centre may sit this far outside the plot area


class BrowserError(Exception):
    """The browser died, refused a command or did not answer in time."""


class NoAnswer(BrowserError):
    """A command got no answer in time (the page may be stuck in a script)."""


class Deadline(Exception):
    """The overall time limit ran out."""


# --------------------------------------------------------------------------
# Locating and running the browser

def find_browser(explicit):
    """Return (path or None, description of where it was looked for)."""
    if explicit:
        path = shutil.which(explicit)
        return path, "--browser %s" % explicit
    env = os.environ.get("DQNTRADER_BROWSER", "").strip()
    if env:
        path = shutil.which(env)
        return path, "$DQNTRADER_BROWSER=%s" % env
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path, name
    return None, "chromium, chromium-browser, google-chrome on PATH"


class Browser:
    """A headless Chromium spoken to over --remote-debugging-pipe."""

    def __init__(self, exe, deadline):
        self.exe = exe
        self.deadline = deadline
        self.proc = None
        self.root = None
        self.to_browser = None
        self.from_browser = None
        self.next_id = 0
        self.buf = bytearray()
        self.scan_from = 0
        self.replies = {}
        self.events = []
        self.argv = []
        self.eof = False
        self.session = None

    # -- lifetime --------------------------------------------------------

    def start(self):
        self.root = tempfile.mkdtemp(prefix="check-report-")
        profile = os.path.join(self.root, "profile")
        os.mkdir(profile)
        self.log_path = os.path.join(self.root, "browser.log")
        argv = [
            self.exe,
            "--headless=new",
            "--remote-debugging-pipe",
            "--user-data-dir=" + profile,
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--mute-audio",
            "--force-color-profile=srgb",
            "--force-device-scale-factor=1",
            "--window-size=%d,%d" % (WINDOW_W, WINDOW_H),
        ]
        if os.geteuid() == 0 or os.environ.get("DQNTRADER_BROWSER_NO_SANDBOX") == "1":
            argv.append("--no-sandbox")
        argv.append("about:blank")
        self.argv = argv

        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        # Copies above 9 so that moving them onto 3 and 4 cannot clobber
        # one another whatever numbers the pipes got.
        child_in = fcntl.fcntl(cmd_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(rep_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(cmd_r)
        os.close(rep_w)

        def place_pipes():
            os.dup2(child_in, 3)   # dup2 clears close-on-exec
            os.dup2(child_out, 4)

        # Keep everything the browser writes outside the profile (crash
        # report database, caches) inside the throw-away directory too.
        env = dict(os.environ)
        for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache")):
            env[var] = os.path.join(self.root, sub)
            os.mkdir(env[var])
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                close_fds=False,  # everything but 0-4 is close-on-exec anyway
                preexec_fn=place_pipes,
                start_new_session=True,  # own process group: killed as one
            )
        finally:
            log.close()
            os.close(child_in)
            os.close(child_out)
        self.to_browser = cmd_w
        self.from_browser = rep_r
        os.set_blocking(cmd_w, False)
        os.set_blocking(rep_r, False)

    def log_tail(self, lines=15):
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def close(self, graceful=True):
        """Stop the browser and its children and remove the profile."""
        if self.proc is not None:
            if graceful and self.proc.poll() is None and self.to_browser is not None and not self.eof:
                try:
                    self.deadline = time.monotonic() + 1.0
                    self._write(json.dumps({"id": 10**9, "method": "Browser.close"}).encode() + b"\0",
                                self.deadline)
                    self.proc.wait(timeout=2)
                except (BrowserError, OSError, Deadline, subprocess.TimeoutExpired):
                    pass
            # The browser's helpers (zygote, renderer, GPU, crashpad) share
            # its process group; make sure none outlives the check.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            # The crash handler puts itself in a session of its own; find it
            # (and anything else the browser left) by our directory's name.
            for pid in self._leftover_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for fd in (self.to_browser, self.from_browser):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.to_browser = self.from_browser = None
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def _leftover_pids(self):
        if not self.root or not os.path.isdir("/proc"):
            return []
        mark = self.root.encode()
        me = os.getpid()
        pids = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if mark in cmdline:
                pids.append(int(name))
        return pids

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- protocol --------------------------------------------------------

    def _remaining(self, until):
        now = time.monotonic()
        left = min(until, self.deadline) - now
        if self.deadline - now <= 0:
            raise Deadline()
        return left

    def _write(self, data, until):
        view = memoryview(data)
        while view:
            left = self._remaining(until)
            if left <= 0:
                raise BrowserError("timed out writing to the browser")
            _, w, _ = select.select([], [self.to_browser], [], left)
            if not w:
                continue
            try:
                n = os.write(self.to_browser, view)
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise BrowserError("the browser closed its command pipe" + self._died())
            view = view[n:]

    def _died(self):
        rc = self.proc.poll() if self.proc else None
        tail = self.log_tail()
        msg = ""
        if rc is not None:
            msg += " (browser exited with status %s)" % rc
        if tail:
            msg += "\n--- browser output ---\n" + tail
        return msg

    def _pump(self, until):
        """Read what the browser sent, waiting until `until` at most.

        Returns True when at least one message arrived."""
        left = self._remaining(until)
        if left <= 0:
            return False
        if self.eof:
            raise BrowserError("the browser closed its reply pipe" + self._died())
        r, _, _ = select.select([self.from_browser], [], [], left)
        if not r:
            return False
        got = False
        while True:
            try:
                chunk = os.read(self.from_browser, 1 << 20)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                raise
            if not chunk:
                self.eof = True
                break
            self.buf += chunk
        while True:
            nul = self.buf.find(b"\0", self.scan_from)
            if nul < 0:
                self.scan_from = len(self.buf)
                break
            raw = bytes(self.buf[:nul])
            del self.buf[:nul + 1]
            self.scan_from = 0
            try:
                msg = json.loads(raw.decode("utf-8"))
            except ValueError:
                raise BrowserError("unreadable message from the browser: %r" % raw[:200])
            if "id" in msg:
                self.replies[msg["id"]] = msg
            else:
                self.events.append(msg)
            got = True
        if self.eof and not got:
            raise BrowserError("the browser closed its reply pipe" + self._died())
        return got

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._write(json.dumps(msg).encode("utf-8") + b"\0", self.deadline)
        return self.next_id

    def call(self, method, params=None, session=None, timeout=20.0):
        mid = self.send(method, params, session)
        until = time.monotonic() + timeout
        while mid not in self.replies:
            if time.monotonic() >= until:
                raise NoAnswer("no answer to %s within %.0f s" % (method, timeout))
            self._pump(until)
        reply = self.replies.pop(mid)
        if "error" in reply:
            err = reply["error"]
            raise BrowserError("%s failed: %s" % (method, err.get("message", err)))
        return reply.get("result", {})

    def wait_event(self, method, session=None, timeout=20.0, start=0):
        """Wait for an event; return (event, index) or (None, len(events))."""
        until = time.monotonic() + timeout
        i = start
        while True:
            while i < len(self.events):
                ev = self.events[i]
                i += 1
                if ev.get("method") == method and (session is None or ev.get("sessionId") == session):
                    return ev, i
            if time.monotonic() >= until:
                return None, i
            self._pump(until)

    def drain(self, seconds):
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self._pump(until)


# --------------------------------------------------------------------------
# PNG decoding (8-bit grey/RGB/grey-alpha/RGBA, non-interlaced, filters 0-4)

class PNGError(Exception):
    pass


def _unfilter_row(ftype, line, prev, bpp):
    n = len(line)
    if ftype == 0:
        return bytearray(line)
    if ftype == 1:  # Sub: running sum per channel
        out = bytearray(n)
        for c in range(bpp):
            out[c::bpp] = bytes(map((255).__and__, accumulate(line[c::bpp])))
        return out
    if ftype == 2:  # Up
        return bytearray(map((255).__and__, map(operator.add, line, prev)))
    if ftype == 3:  # Average
        out = bytearray(n)
        for i in range(bpp):
            out[i] = (line[i] + (prev[i] >> 1)) & 255
        for i in range(bpp, n):
            out[i] = (line[i] + ((out[i - bpp] + prev[i]) >> 1)) & 255
        return out
    if ftype == 4:  # Paeth
        out = bytearray(n)
        for i in range(bpp):
            out[i] = (line[i] + prev[i]) & 255  # a = c = 0 -> predictor b
        for i in range(bpp, n):
            a = out[i - bpp]
            b = prev[i]
            c = prev[i - bpp]
            p = a + b - c
            pa = p - a if p >= a else a - p
            pb = p - b if p >= b else b - p
            pc = p - c if p >= c else c - p
            if pa <= pb and pa <= pc:
                pred = a
            elif pb <= pc:
                pred = b
            else:
                pred = c
            out[i] = (line[i] + pred) & 255
        return out
    raise PNGError("unknown filter type %d" % ftype)


def decode_png(data):
    """Return (width, height, channels, rows) with rows a list of bytes."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise PNGError("not a PNG (bad signature)")
    pos = 8
    ihdr = None
    idat = []
    seen_end = False
    while pos + 8 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc_bytes = data[pos + 8 + length:pos + 12 + length]
        if len(body) != length or len(crc_bytes) != 4:
            raise PNGError("truncated %r chunk" % ctype)
        if zlib.crc32(ctype + body) & 0xFFFFFFFF != struct.unpack(">I", crc_bytes)[0]:
            raise PNGError("CRC mismatch in %r chunk" % ctype)
        pos += 12 + length
        if ctype == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif ctype == b"IDAT":
            idat.append(body)
        elif ctype == b"IEND":
            seen_end = True
            break
    if ihdr is None:
        raise PNGError("no IHDR chunk")
    if not seen_end:
        raise PNGError("no IEND chunk")
    width, height, depth, colour, compression, filt, interlace = ihdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(colour)
    if depth != 8 or channels is None:
        raise PNGError("unsupported PNG format (bit depth %d, colour type %d)" % (depth, colour))
    if compression != 0 or filt != 0 or interlace != 0:
        raise PNGError("unsupported PNG (compression %d, filter %d, interlace %d)"
                       % (compression, filt, interlace))
    if width == 0 or height == 0:
        raise PNGError("empty image %dx%d" % (width, height))
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as e:
        raise PNGError("bad image data: %s" % e)
    stride = width * channels
    if len(raw) != height * (stride + 1):
        raise PNGError("image data is %d bytes, expected %d" % (len(raw), height * (stride + 1)))
    rows = []
    prev = bytes(stride)
    mv = memoryview(raw)
    for y in range(height):
        off = y * (stride + 1)
        row = bytes(_unfilter_row(raw[off], mv[off + 1:off + 1 + stride], prev, channels))
        rows.append(row)
        prev = row
    return width, height, channels, rows


def to_rgb_rows(channels, rows):
    if channels == 3:
        return rows
    out = []
    for row in rows:
        if channels == 4:
            rgb = bytearray(len(row) // 4 * 3)
            rgb[0::3] = row[0::4]
            rgb[1::3] = row[1::4]
            rgb[2::3] = row[2::4]
        elif channels == 1:
            rgb = bytearray(len(row) * 3)
            rgb[0::3] = rgb[1::3] = rgb[2::3] = row
        else:  # grey + alpha
            g = row[0::2]
            rgb = bytearray(len(g) * 3)
            rgb[0::3] = rgb[1::3] = rgb[2::3] = g
        out.append(bytes(rgb))
    return out


def colour_histogram(rgb_rows, x0, y0, x1, y1):
    hist = Counter()
    for y in range(y0, y1):
        seg = rgb_rows[y][3 * x0:3 * x1]
        hist.update(zip(seg[0::3], seg[1::3], seg[2::3]))
    return hist


def cdist(a, b):
    return max(abs(a[0] - b[0]), abs(a[1] - b[1]), abs(a[2] - b[2]))


# --------------------------------------------------------------------------
# SVG path data

_PATH_ARGS = {"M": 2, "L": 2, "H": 1, "V": 1, "C": 6, "S": 4, "Q": 4, "T": 2, "A": 7, "Z": 0}
_PATH_TOKEN = re.compile(
    r"\s*,?\s*(?:([MmLlHhVvCcSsQqTtAaZz])|([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))")


def count_path_points(d):
    """Count the vertices of SVG path data. Returns (count, error or None)."""
    pos = 0
    cmd = None
    pending = 0
    points = 0
    d = d.strip()
    while pos < len(d):
        m = _PATH_TOKEN.match(d, pos)
        if not m or m.end() == pos:
            return points, "unparsable path data at offset %d: %r" % (pos, d[pos:pos + 20])
        pos = m.end()
        if m.group(1):
            if pending:
                return points, "command %s has too few numbers" % cmd
            cmd = m.group(1).upper()
            if cmd == "Z":
                cmd = None
        else:
            if cmd is None:
                return points, "number %r outside a command" % m.group(2)
            if not math.isfinite(float(m.group(2))):
                return points, "non-finite number %r" % m.group(2)
            pending += 1
            if pending == _PATH_ARGS[cmd]:
                points += 1
                pending = 0
                if cmd == "M":
                    cmd = "L"  # extra pairs after a moveto are linetos
    if pending:
        return points, "command %s has too few numbers" % cmd
    return points, None


# --------------------------------------------------------------------------
# Code run inside the page

SETTLE_JS = """
(async () => {
  if (document.fonts && document.fonts.ready) { await document.fonts.ready; }
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return true;
})()
"""

DOM_JS = r"""
((chartIds, opts) => {
  const txt = (el) => (el ? (el.textContent || '').replace(/\s+/g, ' ').trim() : '');
  const cut = (s) => (s.length > 120 ? s.slice(0, 117) + '...' : s);
  // Bounding box of an SVG element's geometry in CSS pixels of the page.
  const box = (el) => {
    let b;
    try { b = el.getBBox(); } catch (e) { return null; }
    const m = el.getScreenCTM();
    if (!m) { return {x: b.x, y: b.y, width: b.width, height: b.height}; }
    const pts = [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height],
                 [b.x + b.width, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
    const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]);
    const x0 = Math.min(...xs), y0 = Math.min(...ys);
    return {x: x0, y: y0, width: Math.max(...xs) - x0, height: Math.max(...ys) - y0};
  };
  const out = {
    title: document.title || '',
    url: location.href,
    viewport: [innerWidth, innerHeight],
    charts: {},
    scripts: document.scripts.length,
  };
  for (const id of chartIds) {
    const el = document.getElementById(id);
    const c = {exists: !!el};
    out.charts[id] = c;
    if (!el) continue;
    c.tag = el.tagName.toLowerCase();
    c.classes = Array.from(el.classList);
    const svgs = el.querySelectorAll('svg');
    c.svgCount = svgs.length;
    const caps = el.querySelectorAll('figcaption');
    c.figcaptionCount = caps.length;
    c.figcaption = cut(txt(caps[0]));
    if (svgs.length < 1) continue;
    const svg = svgs[0];
    c.viewBox = svg.getAttribute('viewBox');
    const sr = svg.getBoundingClientRect();
    c.svgSize = [sr.width, sr.height];
    const plot = svg.querySelector('rect.plot-area');
    c.plotArea = plot ? box(plot) : null;
    c.series = Array.from(svg.querySelectorAll('path.series')).map(p => {
      const cs = getComputedStyle(p);
      return {
        name: p.getAttribute('data-series'),
        d: p.getAttribute('d') || '',
        box: box(p),
        stroke: cs.stroke,
        strokeOpacity: parseFloat(cs.strokeOpacity),
        opacity: parseFloat(cs.opacity),
        display: cs.display,
        visibility: cs.visibility,
      };
    });
    c.bars = Array.from(svg.querySelectorAll('rect.bar')).map(r => {
      const b = box(r);
      return b ? [b.width, b.height] : [0, 0];
    });
    if (opts && opts.points) {
      c.points = Array.from(svg.querySelectorAll('circle.point')).map(p => {
        const cs = getComputedStyle(p);
        return {
          name: p.getAttribute('data-series'),
          r: p.r.baseVal.value,
          box: box(p),
          fill: cs.fill,
          display: cs.display,
          visibility: cs.visibility,
        };
      });
      c.ticks = Array.from(svg.querySelectorAll('text.tick')).map(t => ({text: txt(t), box: box(t)}));
    }
  }
  const table = document.querySelector('table#metrics');
  out.metrics = table ? Array.from(table.querySelectorAll('tr[data-metric]')).map(tr => ({
    key: tr.getAttribute('data-metric'),
    cells: Array.from(tr.children).filter(e => e.tagName === 'TD').map(td => cut(txt(td))),
  })) : null;
  return out;
})
"""

TABLES_JS = r"""
(() => {
  const txt = (el) => (el ? (el.textContent || '').replace(/\s+/g, ' ').trim() : '');
  const cells = (tr, tag) => Array.from(tr.children).filter(e => e.tagName === tag).map(txt);
  const table = (selector, attr) => {
    const t = document.querySelector(selector);
    if (!t) return null;
    const trs = Array.from(t.querySelectorAll('tr'));
    const head = trs.find(tr => !tr.hasAttribute(attr) && tr.querySelector('th'));
    return {
      header: head ? cells(head, 'TH') : null,
      rows: trs.filter(tr => tr.hasAttribute(attr)).map(tr => ({
        key: tr.getAttribute(attr), cells: cells(tr, 'TD')})),
    };
  };
  return {
    leaderboard: table('table#leaderboard', 'data-member'),
    combinations: table('table#combinations', 'data-rank'),
    figures: Array.from(document.querySelectorAll('figure[id]')).map(f => f.id),
  };
})()
"""

RECTS_JS = r"""
((chartIds) => {
  const out = {dpr: window.devicePixelRatio, scroll: [scrollX, scrollY],
               viewport: [innerWidth, innerHeight], figures: {}};
  for (const id of chartIds) {
    const el = document.getElementById(id);
    if (!el) continue;
    const r = el.getBoundingClientRect();
    const f = {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height};
    const svg = el.querySelector('svg');
    const plot = svg && svg.querySelector('rect.plot-area');
    if (plot) {
      const p = plot.getBoundingClientRect();
      f.plot = {x: p.left + scrollX, y: p.top + scrollY, width: p.width, height: p.height};
    }
    out.figures[id] = f;
  }
  return out;
})
"""


def evaluate(browser, session, expression, timeout=20.0, await_promise=False):
    res = browser.call("Runtime.evaluate", {
        "expression": expression,
        "returnByValue": True,
        "awaitPromise": await_promise,
        "userGesture": False,
    }, session=session, timeout=timeout)
    if "exceptionDetails" in res:
        raise BrowserError("script in the page failed: %s" % exception_text(res["exceptionDetails"]))
    return res.get("result", {}).get("value")


def exception_text(details):
    exc = details.get("exception") or {}
    text = exc.get("description") or details.get("text") or "exception"
    text = text.splitlines()[0] if text else "exception"
    where = details.get("url") or ""
    if where or "lineNumber" in details:
        text += " (at %s:%s:%s)" % (where or "?", details.get("lineNumber", -1) + 1,
                                    details.get("columnNumber", -1) + 1)
    return text


def console_text(params):
    parts = []
    for arg in params.get("args", []):
        if "value" in arg:
            parts.append(arg["value"] if isinstance(arg["value"], str) else json.dumps(arg["value"]))
        else:
            parts.append(arg.get("description") or arg.get("unserializableValue") or arg.get("type", "?"))
    text = " ".join(str(p) for p in parts)
    frames = (params.get("stackTrace") or {}).get("callFrames") or []
    if frames:
        f = frames[0]
        text += " (at %s:%d:%d)" % (f.get("url") or "?", f.get("lineNumber", -1) + 1,
                                    f.get("columnNumber", -1) + 1)
    return text


# --------------------------------------------------------------------------
# Checks on the collected data

def check_events(events, session, fail, stats):
    requests = {}
    for ev in events:
        if ev.get("sessionId") != session:
            continue
        method = ev.get("method")
        p = ev.get("params", {})
        if method == "Runtime.exceptionThrown":
            fail("console", "uncaught exception: %s" % exception_text(p.get("exceptionDetails", {})))
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            fail("console", "console.%s: %s" % (p.get("type"), console_text(p)))
        elif method == "Log.entryAdded":
            entry = p.get("entry", {})
            if entry.get("level") == "error":
                where = entry.get("url") or ""
                fail("console", "log error (%s): %s%s" % (
                    entry.get("source", "?"), entry.get("text", ""),
                    (" [%s]" % where) if where else ""))
        elif method == "Network.requestWillBeSent":
            url = p.get("request", {}).get("url", "")
            requests[p.get("requestId")] = url
            stats["requests"] += 1
            if not url.lower().startswith(ALLOWED_SCHEMES):
                fail("network", "request to a non-local URL (only file: and data: are allowed): %s"
                     % url[:200])
        elif method == "Network.loadingFailed":
            rid = p.get("requestId")
            reason = p.get("errorText") or "failed"
            if p.get("blockedReason"):
                reason += " (blocked: %s)" % p["blockedReason"]
            fail("network", "loading failed: %s: %s" % (requests.get(rid, "request %s" % rid)[:200], reason))


def check_title(dom, fail):
    if not dom.get("title", "").strip():
        fail("dom", "document has no non-empty <title>")


def check_figure(c, cid, fail):
    """What every chart figure must satisfy. False when there is no svg to look into."""
    where = "#" + cid
    if not c.get("exists"):
        fail("dom", "%s: missing (need <figure class=\"chart\" id=\"%s\">)" % (where, cid))
        return False
    if c.get("tag") != "figure" or "chart" not in c.get("classes", []):
        fail("dom", "%s: is <%s class=\"%s\">, need <figure class=\"chart\">"
             % (where, c.get("tag"), " ".join(c.get("classes", []))))
    if c.get("svgCount") != 1:
        fail("dom", "%s: contains %d <svg> elements, need exactly 1" % (where, c.get("svgCount", 0)))
    if not c.get("figcaption"):
        fail("dom", "%s: no <figcaption> with text" % where)
    if c.get("svgCount", 0) < 1:
        return False
    vb = (c.get("viewBox") or "").strip()
    if not vb:
        fail("dom", "%s: <svg> has no viewBox" % where)
    else:
        nums = re.split(r"[\s,]+", vb)
        try:
            vals = [float(v) for v in nums]
            if len(vals) != 4 or vals[2] <= 0 or vals[3] <= 0:
                raise ValueError
        except ValueError:
            fail("dom", "%s: <svg> viewBox %r is not 'min-x min-y width height' with positive size"
                 % (where, vb))
    size = c.get("svgSize") or [0, 0]
    if size[0] <= 0 or size[1] <= 0:
        fail("dom", "%s: <svg> is not rendered (size %gx%g)" % (where, size[0], size[1]))
    return True


def plot_area_of(c, where, fail):
    plot = c.get("plotArea")
    if plot is None:
        fail("dom", "%s: <svg> has no rect.plot-area" % where)
    elif plot["width"] <= 0:
        fail("dom", "%s: rect.plot-area has zero width" % where)
        plot = None
    return plot


def series_by_name(c, where, fail):
    by_name = {}
    for s in c.get("series", []):
        name = s.get("name")
        if not name:
            fail("dom", "%s: a path.series has no data-series attribute" % where)
            continue
        by_name.setdefault(name, []).append(s)
    return by_name


def check_path(s, label, plot, fail, stats, key=None, min_width=MIN_SERIES_WIDTH_FRACTION,
               must_vary=False):
    """One path.series: parsable, enough points, rendered, wide enough (min_width None: any)."""
    npts, err = count_path_points(s.get("d", ""))
    if err:
        fail("dom", "%s: bad d attribute: %s" % (label, err))
    if npts < MIN_SERIES_POINTS:
        fail("dom", "%s: has %d point(s), need >= %d" % (label, npts, MIN_SERIES_POINTS))
    if key is not None:
        stats["series_points"][key] = npts
    b = s.get("box")
    if s.get("display") == "none" or s.get("visibility") != "visible" or b is None:
        fail("dom", "%s: not rendered (display=%s, visibility=%s)"
             % (label, s.get("display"), s.get("visibility")))
        return
    if plot is not None and min_width is not None:
        frac = b["width"] / plot["width"]
        if frac < min_width:
            fail("dom", "%s: spans %.1f px = %.0f%% of the plot area's %.1f px width, need >= %.0f%%"
                 % (label, b["width"], 100 * frac, plot["width"], 100 * min_width))
    if must_vary and not b["height"] > 0:
        fail("dom", "%s: is flat (bounding box height 0); the equity curve must vary" % label)


def check_named_series(c, cid, series_names, plot, by_name, fail, stats, must_vary=()):
    where = "#" + cid
    for name in series_names:
        found = by_name.get(name, [])
        label = "%s series %r" % (where, name)
        if not found:
            present = ", ".join(sorted(by_name)) or "none"
            fail("dom", "%s: missing (path.series[data-series=%r]; present: %s)" % (label, name, present))
            continue
        if len(found) > 1:
            fail("dom", "%s: %d paths carry this name, need exactly 1" % (label, len(found)))
        check_path(found[0], label, plot, fail, stats, key=cid + ":" + name,
                   must_vary=name in must_vary)


def check_dom(dom, fail, stats):
    if not isinstance(dom, dict):
        fail("dom", "DOM query returned nothing")
        return
    check_title(dom, fail)
    charts = dom.get("charts", {})
    for cid, series_names in CHARTS.items():
        c = charts.get(cid, {})
        where = "#" + cid
        if not check_figure(c, cid, fail):
            continue

        if series_names is None:  # histogram
            bars = c.get("bars", [])
            nonzero = sum(1 for w, h in bars if h > 0)
            if len(bars) < MIN_BARS:
                fail("dom", "%s: histogram has %d rect.bar elements, need >= %d" % (where, len(bars), MIN_BARS))
            if nonzero < MIN_NONZERO_BARS:
                fail("dom", "%s: histogram has %d bars with height > 0, need >= %d"
                     % (where, nonzero, MIN_NONZERO_BARS))
            stats["bars"] = len(bars)
            continue

        plot = plot_area_of(c, where, fail)
        by_name = series_by_name(c, where, fail)
        check_named_series(c, cid, series_names, plot, by_name, fail, stats,
                           must_vary=("policy",) if cid == "chart-equity" else ())

    rows = dom.get("metrics")
    if rows is None:
        fail("dom", "table#metrics: missing")
    else:
        stats["metric_rows"] = len(rows)
        if len(rows) < MIN_METRIC_ROWS:
            fail("dom", "table#metrics: has %d tr[data-metric] rows, need >= %d" % (len(rows), MIN_METRIC_ROWS))
        seen = Counter(r.get("key") for r in rows)
        for key, n in sorted(seen.items(), key=lambda kv: str(kv[0])):
            if not key:
                fail("dom", "table#metrics: %d row(s) with an empty data-metric attribute" % n)
            elif n > 1:
                fail("dom", "table#metrics: data-metric=%r appears in %d rows" % (key, n))
        for r in rows:
            key = r.get("key") or "?"
            cells = r.get("cells", [])
            if len(cells) != 3:
                fail("dom", "table#metrics row %r: has %d <td> cells, need 3 (key, value, definition)"
                     % (key, len(cells)))
                continue
            for idx, what in ((0, "key"), (1, "value"), (2, "definition")):
                if not cells[idx]:
                    fail("dom", "table#metrics row %r: %s cell is empty" % (key, what))
        for key in REQUIRED_METRICS:
            if key not in seen:
                fail("dom", "table#metrics: no row tr[data-metric=%r]" % key)


# --------------------------------------------------------------------------
# Sweep report (--sweep)

def leaderboard_settings(header):
    """The swept settings: the leaderboard's columns between "seed" and "status" (None: no such)."""
    if not header or header.count("seed") != 1 or header.count("status") != 1:
        return None
    seed, status = header.index("seed"), header.index("status")
    return header[seed + 1:status] if seed < status else None


def sweep_chart_ids(tables):
    """Charts a sweep report must hold, then any other figure on the page (screenshot check)."""
    lb = (tables or {}).get("leaderboard") or {}
    settings = leaderboard_settings(lb.get("header")) or []
    ids = [SWEEP_MEMBER_CHART] + [SWEEP_SETTING_PREFIX + s for s in settings] + [SWEEP_EQUITY_CHART]
    for fid in (tables or {}).get("figures") or []:
        if fid not in ids:
            ids.append(fid)
    return ids


def _cell_number(text):
    """A table cell as a number: 'nan' and 'inf' too; None when it is none."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _numeric_setting(text):
    """Whether the report plots a setting value on a numeric axis (the whole text a finite number)."""
    if not text or text != text.strip() or "_" in text:
        return False
    v = _cell_number(text)
    return v is not None and math.isfinite(v)


def _fmt(v):
    return "nan" if v is None or math.isnan(v) else "%g" % v


def check_leaderboard(tables, fail, stats):
    """table#leaderboard. Returns (settings, rows, keys): the swept settings, the rows that
    parse ({member, status, sharpe, values}) and the data-member of every row."""
    where = "table#leaderboard"
    lb = (tables or {}).get("leaderboard")
    if lb is None:
        fail("dom", "%s: missing" % where)
        return [], [], set()
    rows = lb.get("rows") or []
    keys = {r.get("key") for r in rows if r.get("key")}
    stats["leaderboard_rows"] = len(rows)
    if len(rows) < MIN_LEADERBOARD_ROWS:
        fail("dom", "%s: has %d tr[data-member] rows, need >= %d" % (where, len(rows), MIN_LEADERBOARD_ROWS))
    header = lb.get("header")
    if not header:
        fail("dom", "%s: no header row (a tr of th cells)" % where)
        return [], [], keys
    settings = leaderboard_settings(header)
    expected = None
    if settings is not None:
        expected = (list(LEADERBOARD_COLUMNS[:3]) + settings + list(LEADERBOARD_COLUMNS[3:]))
    if expected is None or header != expected:
        fail("dom", "%s: header is [%s], need [%s]" % (
            where, ", ".join(header),
            ", ".join(LEADERBOARD_COLUMNS[:3] + ("<one per swept setting>",) + LEADERBOARD_COLUMNS[3:])))
        return [], [], keys
    for name, n in sorted(Counter(settings).items()):
        if not name or n > 1 or name in LEADERBOARD_COLUMNS:
            fail("dom", "%s: setting column %r appears %d time(s); each swept setting needs one "
                 "column with a name of its own" % (where, name, n))
    stats["settings"] = settings
    col = {name: header.index(name) for name in LEADERBOARD_COLUMNS}
    first_setting = col["seed"] + 1

    for key, n in sorted(Counter(r.get("key") for r in rows).items(), key=lambda kv: str(kv[0])):
        if not key:
            fail("dom", "%s: %d row(s) with an empty data-member attribute" % (where, n))
        elif n > 1:
            fail("dom", "%s: data-member=%r appears in %d rows" % (where, key, n))

    parsed = []
    previous = None  # the last non-nan Sharpe
    nan_row = None   # the first row whose Sharpe is nan
    after_nan = []   # rows with a number below a 'nan' row
    for i, r in enumerate(rows):
        key = r.get("key") or "?"
        label = "%s row %r" % (where, key)
        cells = r.get("cells", [])
        if len(cells) != len(header):
            fail("dom", "%s: has %d <td> cells, need %d (one per header cell)" % (label, len(cells), len(header)))
            continue
        if cells[col["rank"]] != str(i + 1):
            fail("dom", "%s: rank cell is %r, need %d (ranks 1..N down the table)"
                 % (label, cells[col["rank"]], i + 1))
        if cells[col["member"]] != key:
            fail("dom", "%s: member cell is %r, need the row's data-member" % (label, cells[col["member"]]))
        text = cells[col["validation Sharpe"]]
        sharpe = _cell_number(text)
        if sharpe is None:
            fail("dom", "%s: validation Sharpe %r is neither a number nor 'nan'" % (label, text))
            sharpe = float("nan")
        elif math.isnan(sharpe):
            if nan_row is None:
                nan_row = key
        elif nan_row is not None:
            after_nan.append((key, text))
        elif previous is not None and sharpe > previous:
            fail("dom", "%s: validation Sharpe %s is above the row before it (%s); the table must be "
                 "ranked best first" % (label, text, _fmt(previous)))
        if not math.isnan(sharpe):
            previous = sharpe
        parsed.append({
            "member": key,
            "status": cells[col["status"]],
            "sharpe": sharpe,
            "values": {s: cells[first_setting + j] for j, s in enumerate(settings)},
        })
    if after_nan:
        fail("dom", "%s row %r: validation Sharpe %s comes after row %r with 'nan'%s; 'nan' rows go last"
             % (where, after_nan[0][0], after_nan[0][1], nan_row,
                " (and %d more row(s) with a number)" % (len(after_nan) - 1) if len(after_nan) > 1 else ""))
    return settings, parsed, keys


def check_combinations(tables, settings, rows, fail, stats):
    where = "table#combinations"
    cb = (tables or {}).get("combinations")
    if cb is None:
        fail("dom", "%s: missing" % where)
        return
    crows = cb.get("rows") or []
    stats["combination_rows"] = len(crows)
    if len(crows) < MIN_COMBINATION_ROWS:
        fail("dom", "%s: has %d tr[data-rank] rows, need >= %d" % (where, len(crows), MIN_COMBINATION_ROWS))
    header = cb.get("header") or []
    if not header:
        fail("dom", "%s: no header row (a tr of th cells)" % where)
    combos = set()
    for i, r in enumerate(crows):
        label = "%s row %d" % (where, i + 1)
        if r.get("key") != str(i + 1):
            fail("dom", "%s: data-rank is %r, need %d (ranks 1..N down the table)" % (label, r.get("key"), i + 1))
        cells = r.get("cells", [])
        if header and len(cells) != len(header):
            fail("dom", "%s: has %d <td> cells, need %d (one per header cell)" % (label, len(cells), len(header)))
            continue
        combos.add(tuple(cells[1:1 + len(settings)]))
    # One row per combination of settings: the same combinations as the members'.
    if header[:1 + len(settings)] == ["rank"] + list(settings) and rows:
        members = {tuple(r["values"][s] for s in settings) for r in rows}
        if len(combos) != len(crows) or combos != members:
            fail("dom", "%s: %d rows with %d distinct combinations of settings; table#leaderboard's "
                 "members have %d (missing: %s; extra: %s)" % (
                     where, len(crows), len(combos), len(members),
                     sorted(members - combos)[:5] or "none", sorted(combos - members)[:5] or "none"))
    elif header:
        fail("dom", "%s: header starts [%s], need [rank, %s]"
             % (where, ", ".join(header[:1 + len(settings)]), ", ".join(settings)))


def check_member_chart(c, rows, keys, fail, stats):
    cid = SWEEP_MEMBER_CHART
    where = "#" + cid
    if not check_figure(c, cid, fail):
        return
    plot = plot_area_of(c, where, fail)
    by_name = series_by_name(c, where, fail)
    stats["member_paths"] = len(by_name)
    if len(by_name) < MIN_MEMBER_PATHS:
        fail("dom", "%s: has %d named path.series, need >= %d (one per member that ran)"
             % (where, len(by_name), MIN_MEMBER_PATHS))
    for name in sorted(by_name):
        label = "%s series %r" % (where, name)
        found = by_name[name]
        if len(found) > 1:
            fail("dom", "%s: %d paths carry this name, need exactly 1" % (label, len(found)))
        check_path(found[0], label, plot, fail, stats, min_width=None)
        if keys and name not in keys:
            fail("dom", "%s: no table#leaderboard row tr[data-member=%r]" % (label, name))
    status = {r["member"]: r["status"] for r in rows}
    for name in sorted(by_name):
        if status.get(name) in NO_RUN_STATUSES:
            fail("dom", "%s series %r: member has status %r; only members that ran get a path"
                 % (where, name, status[name]))
    for r in rows:
        if r["status"] not in NO_RUN_STATUSES and math.isfinite(r["sharpe"]) and r["member"] not in by_name:
            fail("dom", "%s: no path.series[data-series=%r] for leaderboard member %r (status %r, "
                 "validation Sharpe %s)" % (where, r["member"], r["member"], r["status"], _fmt(r["sharpe"])))
    # The best member (rank 1) stands out from the others.
    if rows and rows[0]["member"] in by_name:
        best = rows[0]["member"]
        best_col = parse_css_colour(by_name[best][0].get("stroke"))
        if best_col is None or best_col[3] == 0:
            fail("dom", "%s series %r (the best member): stroke is %r, need a solid colour"
                 % (where, best, by_name[best][0].get("stroke")))
        else:
            for name in sorted(by_name):
                col = parse_css_colour(by_name[name][0].get("stroke"))
                if name != best and col is not None and cdist(col, best_col) < MIN_STROKE_SEPARATION:
                    fail("dom", "%s: the best member %r and member %r are stroked in (nearly) the same "
                         "colour (%s, %s)" % (where, best, name, by_name[best][0].get("stroke"),
                                              by_name[name][0].get("stroke")))
                    break


def _centre(b):
    return b["x"] + b["width"] / 2.0, b["y"] + b["height"] / 2.0


def check_setting_chart(c, setting, rows, fail, stats):
    cid = SWEEP_SETTING_PREFIX + setting
    where = "#" + cid
    if not check_figure(c, cid, fail):
        return
    plot = plot_area_of(c, where, fail)
    if plot is not None and not plot["height"] > 0:
        fail("dom", "%s: rect.plot-area has zero height" % where)
        plot = None
    if c.get("series"):
        fail("dom", "%s: has %d path.series, need none (a scatter chart of circle.point)"
             % (where, len(c["series"])))
    points = c.get("points") or []
    finite = [r for r in rows if math.isfinite(r["sharpe"])]
    stats.setdefault("setting_points", {})[cid] = len(points)
    if len(points) != len(finite):
        fail("dom", "%s: has %d circle.point elements, need %d (one per table#leaderboard row with a "
             "finite validation Sharpe)" % (where, len(points), len(finite)))
    names = Counter(p.get("name") for p in points)
    for name, n in sorted(names.items(), key=lambda kv: str(kv[0])):
        if name not in SWEEP_POINT_SERIES:
            fail("dom", "%s: %d circle.point element(s) with data-series=%r, need one of %s"
                 % (where, n, name, ", ".join(SWEEP_POINT_SERIES)))
    if names.get("best", 0) != 1:
        fail("dom", "%s: has %d circle.point[data-series=\"best\"], need exactly 1" % (where, names.get("best", 0)))
    centres = []  # (series, cx, cy) of the points that render
    outside = 0
    for i, p in enumerate(points):
        label = "%s circle.point #%d (data-series=%r)" % (where, i + 1, p.get("name"))
        r = p.get("r")
        if not (isinstance(r, (int, float)) and r > 0):
            fail("dom", "%s: radius is %r, need > 0" % (label, r))
        b = p.get("box")
        if p.get("display") == "none" or p.get("visibility") != "visible" or b is None \
                or not (b["width"] > 0 and b["height"] > 0):
            fail("dom", "%s: not rendered (display=%s, visibility=%s, box %s)"
                 % (label, p.get("display"), p.get("visibility"),
                    "none" if b is None else "%.1fx%.1f" % (b["width"], b["height"])))
            continue
        cx, cy = _centre(b)
        centres.append((p.get("name"), cx, cy))
        if plot is not None:
            s = POINT_SLACK_PX
            if not (plot["x"] - s <= cx <= plot["x"] + plot["width"] + s
                    and plot["y"] - s <= cy <= plot["y"] + plot["height"] + s):
                outside += 1
                if outside <= 3:
                    fail("dom", "%s: centre (%.1f, %.1f) lies outside the plot area (x %.1f..%.1f, "
                         "y %.1f..%.1f)" % (label, cx, cy, plot["x"], plot["x"] + plot["width"],
                                            plot["y"], plot["y"] + plot["height"]))
    if outside > 3:
        fail("dom", "%s: %d circle.point elements in all lie outside the plot area" % (where, outside))
    # The best member has the highest validation Sharpe: no point above its point.
    best = [cy for name, _, cy in centres if name == "best"]
    others = [cy for name, _, cy in centres if name != "best"]
    if len(best) == 1 and others and best[0] > min(others) + POINT_SLACK_PX:
        fail("dom", "%s: the best member's point (y %.1f px) lies below another point (y %.1f px); "
             "it has the highest validation Sharpe" % (where, best[0], min(others)))
    # Settings that are not all numbers sit on a categorical axis: one tick label per category.
    values = [r["values"].get(setting, "") for r in rows]
    if values and not all(_numeric_setting(v) for v in values):
        stats.setdefault("categorical_settings", []).append(setting)
        categories = list(dict.fromkeys(values))
        if plot is not None:
            bottom = plot["y"] + plot["height"]
            labels = [t.get("text", "") for t in c.get("ticks") or []
                      if t.get("box") and _centre(t["box"])[1] > bottom]
            for cat in categories:
                n = labels.count(cat)
                if n != 1:
                    fail("dom", "%s: categorical x axis shows %d tick label(s) %r, need exactly 1 "
                         "(x tick labels: %s)" % (where, n, cat, ", ".join(map(repr, labels)) or "none"))
        shown = {r["values"].get(setting, "") for r in finite}
        columns = {round(2 * cx) for _, cx, _ in centres}
        if centres and len(centres) == len(points) and len(columns) != len(shown):
            fail("dom", "%s: points sit at %d distinct x positions, need %d (one per category with a "
                 "result: %s)" % (where, len(columns), len(shown), ", ".join(map(repr, sorted(shown)))))


def check_sweep_dom(dom, tables, chart_ids, fail, stats):
    if not isinstance(dom, dict):
        fail("dom", "DOM query returned nothing")
        return
    if not isinstance(tables, dict):
        fail("dom", "table query returned nothing")
        tables = {}
    check_title(dom, fail)
    charts = dom.get("charts", {})
    settings, rows, keys = check_leaderboard(tables, fail, stats)
    check_combinations(tables, settings, rows, fail, stats)
    check_member_chart(charts.get(SWEEP_MEMBER_CHART, {}), rows, keys, fail, stats)
    for setting in settings:
        check_setting_chart(charts.get(SWEEP_SETTING_PREFIX + setting, {}), setting, rows, fail, stats)
    cid = SWEEP_EQUITY_CHART
    c = charts.get(cid, {})
    if check_figure(c, cid, fail):
        plot = plot_area_of(c, "#" + cid, fail)
        by_name = series_by_name(c, "#" + cid, fail)
        check_named_series(c, cid, SWEEP_EQUITY_SERIES, plot, by_name, fail, stats)
    checked = {SWEEP_MEMBER_CHART, SWEEP_EQUITY_CHART} | {SWEEP_SETTING_PREFIX + s for s in settings}
    for cid in chart_ids:
        if cid not in checked:
            check_figure(charts.get(cid, {}), cid, fail)


_RGB = re.compile(r"rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)(?:\s*[,/]\s*([\d.]+%?))?\s*\)")


def parse_css_colour(text):
    """rgb()/rgba() as computed by the browser -> (r, g, b, alpha) or None."""
    m = _RGB.fullmatch((text or "").strip())
    if not m:
        return None
    r, g, b = (int(round(float(v))) for v in m.group(1, 2, 3))
    a = m.group(4)
    if a is None:
        alpha = 1.0
    elif a.endswith("%"):
        alpha = float(a[:-1]) / 100
    else:
        alpha = float(a)
    return r, g, b, alpha


def _number(value, default):
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return default


def check_screenshot(png_bytes, rects, dom, fail, stats, chart_ids=tuple(CHARTS),
                     colour_charts=(("chart-equity", EQUITY_SERIES),)):
    """Ink in every figure of chart_ids; for each (chart id, series names) of colour_charts,
    distinct stroke colours for those series that show up in the picture."""
    if not png_bytes:
        fail("screenshot", "screenshot is empty")
        return
    t0 = time.monotonic()
    try:
        width, height, channels, rows = decode_png(png_bytes)
    except PNGError as e:
        fail("screenshot", "screenshot does not decode: %s" % e)
        return
    stats["png_size"] = [width, height]
    rgb = to_rgb_rows(channels, rows)
    bg = tuple(rgb[0][0:3])
    stats["background"] = "#%02x%02x%02x" % bg
    dpr = rects.get("dpr") or 1.0
    vw = rects.get("viewport", [width, height])[0]
    # Trust the image for the scale when it disagrees with devicePixelRatio.
    scale = dpr if abs(vw * dpr - width) <= 2 else width / float(vw or width)

    def region(r):
        x0 = max(0, int(math.floor(r["x"] * scale)))
        y0 = max(0, int(math.floor(r["y"] * scale)))
        x1 = min(width, int(math.ceil((r["x"] + r["width"]) * scale)))
        y1 = min(height, int(math.ceil((r["y"] + r["height"]) * scale)))
        return x0, y0, x1, y1

    colour_charts = dict(colour_charts)
    ink = {}
    for cid in chart_ids:
        f = rects.get("figures", {}).get(cid)
        if f is None:
            continue  # already reported as missing
        x0, y0, x1, y1 = region(f)
        full = max(1, int(round(f["width"] * scale)) * int(round(f["height"] * scale)))
        area = max(0, x1 - x0) * max(0, y1 - y0)
        if area <= 0:
            fail("screenshot", "#%s: figure lies outside the %dx%d screenshot" % (cid, width, height))
            continue
        if area < 0.9 * full:
            fail("screenshot", "#%s: only %.0f%% of the figure is inside the screenshot"
                 % (cid, 100.0 * area / full))
        hist = colour_histogram(rgb, x0, y0, x1, y1)
        differing = sum(n for col, n in hist.items() if cdist(col, bg) > NOTICEABLE)
        frac = differing / float(area)
        ink[cid] = round(frac, 4)
        if frac < MIN_INK_FRACTION:
            fail("screenshot", "#%s: only %.2f%% of its pixels differ from the background %s, need >= %.0f%%"
                 % (cid, 100 * frac, stats["background"], 100 * MIN_INK_FRACTION))
        if cid in colour_charts:
            check_equity_colours(hist, area, bg, f, rgb, scale, region, dom, fail, stats,
                                 cid, colour_charts[cid])
    stats["ink_fraction"] = ink
    stats["png_analysis_s"] = round(time.monotonic() - t0, 2)


def check_equity_colours(hist, area, bg, f, rgb, scale, region, dom, fail, stats,
                         cid="chart-equity", series_names=EQUITY_SERIES):
    # The plot's own background: the commonest colour inside the plot area.
    plot = f.get("plot")
    if plot:
        px0, py0, px1, py1 = region(plot)
        phist = colour_histogram(rgb, px0, py0, px1, py1) if px1 > px0 and py1 > py0 else hist
    else:
        phist = hist
    local_bg = phist.most_common(1)[0][0] if phist else bg
    # Distinct colours: 16 levels a channel, ignoring both backgrounds and
    # colours that only a handful of pixels have (antialiasing fringes).
    buckets = Counter()
    for col, n in hist.items():
        if cdist(col, bg) > NOTICEABLE and cdist(col, local_bg) > NOTICEABLE:
            buckets[(col[0] >> 4, col[1] >> 4, col[2] >> 4)] += n
    floor_n = max(10, int(0.0005 * area))
    distinct = [b for b, n in buckets.items() if n >= floor_n]
    stats["equity_colours"] = len(distinct)
    if len(distinct) < 2:
        fail("screenshot", "#%s: %d distinct non-background colour(s) in the chart, need >= 2"
             % (cid, len(distinct)))
    # Each series' stroke must be a colour of its own and show up on screen.
    series = (dom or {}).get("charts", {}).get(cid, {}).get("series", [])
    strokes = {}
    for s in series:
        name = s.get("name")
        if name not in series_names or name in strokes:
            continue
        col = parse_css_colour(s.get("stroke"))
        if col is None or col[3] == 0:
            fail("screenshot", "#%s series %r: stroke is %r, need a solid colour"
                 % (cid, name, s.get("stroke")))
            continue
        alpha = col[3] * _number(s.get("strokeOpacity"), 1.0) * _number(s.get("opacity"), 1.0)
        alpha = max(0.0, min(1.0, alpha))
        seen = tuple(int(round(alpha * col[i] + (1 - alpha) * local_bg[i])) for i in range(3))
        strokes[name] = seen
        n = sum(cnt for c, cnt in hist.items() if cdist(c, seen) <= STROKE_TOLERANCE)
        stats.setdefault("equity_stroke_pixels", {})[name] = n
        if n < MIN_STROKE_PIXELS:
            fail("screenshot", "#%s series %r: its stroke colour #%02x%02x%02x appears in only %d "
                 "pixel(s) of the screenshot, need >= %d" % ((cid, name) + seen + (n, MIN_STROKE_PIXELS)))
    names = sorted(strokes)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            a, b = strokes[first], strokes[second]
            if cdist(a, b) < MIN_STROKE_SEPARATION:
                fail("screenshot", "#%s: series %r (#%02x%02x%02x) and %r "
                     "(#%02x%02x%02x) are drawn in (nearly) the same colour"
                     % ((cid, first) + a + (second,) + b))


# --------------------------------------------------------------------------
# Driver

def run_checks(browser, report_url, shot_path, fail, stats, deadline, sweep=False):
    version = browser.call("Browser.getVersion")
    stats["browser_version"] = version.get("product")
    target = browser.call("Target.createTarget", {"url": "about:blank"})
    session = browser.call("Target.attachToTarget",
                           {"targetId": target["targetId"], "flatten": True})["sessionId"]
    browser.session = session
    for domain in ("Runtime", "Log", "Page", "Network"):
        browser.call(domain + ".enable", session=session)
    # A self-contained report loads nothing from a network; block it so a
    # stray reference fails fast (and is still reported) instead of hanging.
    try:
        browser.call("Network.setBlockedURLs", {"urls": [
            "http://*", "https://*", "ws://*", "wss://*", "ftp://*"]}, session=session)
    except BrowserError:
        pass
    mark = len(browser.events)
    nav = browser.call("Page.navigate", {"url": report_url}, session=session)
    if nav.get("errorText"):
        fail("load", "navigation to %s failed: %s" % (report_url, nav["errorText"]))
        return
    load_wait = max(1.0, min(20.0, deadline - time.monotonic() - 25.0))
    ev, _ = browser.wait_event("Page.loadEventFired", session=session, timeout=load_wait, start=mark)
    if ev is None:
        fail("load", "page did not finish loading within %.0f s" % load_wait)
        try:
            browser.call("Page.stopLoading", session=session, timeout=5)
        except BrowserError:
            pass
    try:
        evaluate(browser, session, SETTLE_JS, timeout=10, await_promise=True)
    except NoAnswer:
        fail("load", "the page does not answer a script within 10 s (is a script stuck in a loop?); "
                     "DOM and screenshot checks skipped")
        return
    except BrowserError as e:
        fail("load", str(e))
    browser.drain(0.2)  # late console messages and requests

    if sweep:
        tables = evaluate(browser, session, TABLES_JS, timeout=15)
        chart_ids = sweep_chart_ids(tables)
        dom = evaluate(browser, session, "(%s)(%s, %s)" % (
            DOM_JS, json.dumps(chart_ids), json.dumps({"points": True})), timeout=15)
        check_sweep_dom(dom, tables, chart_ids, fail, stats)
        colour_charts = ((SWEEP_EQUITY_CHART, SWEEP_EQUITY_SERIES),)
    else:
        chart_ids = list(CHARTS)
        dom = evaluate(browser, session, "(%s)(%s)" % (DOM_JS, json.dumps(chart_ids)), timeout=15)
        check_dom(dom, fail, stats)
        colour_charts = (("chart-equity", EQUITY_SERIES),)

    # Full-page screenshot: make the viewport as tall as the document.
    metrics = browser.call("Page.getLayoutMetrics", session=session)
    content = metrics.get("cssContentSize") or metrics.get("contentSize") or {}
    page_h = int(math.ceil(content.get("height", WINDOW_H)))
    shot_h = max(1, min(page_h, MAX_SHOT_H))
    stats["page_size"] = [int(math.ceil(content.get("width", WINDOW_W))), page_h]
    if page_h > MAX_SHOT_H:
        fail("screenshot", "page is %d px tall; only the top %d px can be captured" % (page_h, MAX_SHOT_H))
    browser.call("Emulation.setDeviceMetricsOverride", {
        "width": WINDOW_W, "height": shot_h, "deviceScaleFactor": 1, "mobile": False,
    }, session=session)
    evaluate(browser, session, SETTLE_JS, timeout=10, await_promise=True)
    rects = evaluate(browser, session, "(%s)(%s)" % (RECTS_JS, json.dumps(chart_ids)), timeout=10)
    params = {"format": "png", "fromSurface": True, "captureBeyondViewport": False,
              "optimizeForSpeed": True}
    try:
        shot = browser.call("Page.captureScreenshot", params, session=session, timeout=30)
    except NoAnswer:
        raise
    except BrowserError:  # a browser that does not know optimizeForSpeed
        params.pop("optimizeForSpeed")
        shot = browser.call("Page.captureScreenshot", params, session=session, timeout=30)
    png = base64.b64decode(shot.get("data", ""))
    try:
        with open(shot_path, "wb") as f:
            f.write(png)
    except OSError as e:
        fail("screenshot", "cannot write %s: %s" % (shot_path, e))
    stats["screenshot_bytes"] = len(png)
    check_screenshot(png, rects or {}, dom, fail, stats, chart_ids, colour_charts)
    browser.drain(0.1)


def main(argv=None):
    t_start = time.monotonic()
    ap = argparse.ArgumentParser(description="Check an HTML report in headless Chromium.")
    ap.add_argument("report", help="the report HTML file")
    ap.add_argument("--screenshot", required=True, help="where to write the full-page PNG")
    ap.add_argument("--browser", help="Chromium binary (default: $DQNTRADER_BROWSER, then "
                                      "chromium, chromium-browser, google-chrome on PATH)")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                    help="overall limit in seconds (default %(default)s)")
    ap.add_argument("--sweep", action="store_true",
                    help="check a sweep report (dqntrader report SWEEP_DIR) instead of a run report")
    args = ap.parse_args(argv)
    require = os.environ.get("DQNTRADER_REQUIRE_BROWSER") == "1"

    failures = []

    def fail(kind, msg):
        failures.append("[%s] %s" % (kind, msg))

    stats = {"requests": 0, "series_points": {}}
    report = os.path.abspath(args.report)
    summary = {"ok": False, "report": report, "screenshot": os.path.abspath(args.screenshot)}

    if not os.path.isfile(report):
        print("check_report: FAIL: [input] report %s does not exist" % report, file=sys.stderr)
        return EXIT_FAIL

    exe, looked = find_browser(args.browser)
    if exe is None:
        if require:
            print("check_report: FAIL: no browser found (looked for %s) and DQNTRADER_REQUIRE_BROWSER=1"
                  % looked, file=sys.stderr)
            return EXIT_FAIL
        print("check_report: SKIP: no browser found (looked for %s)" % looked, file=sys.stderr)
        return EXIT_SKIP
    summary["browser"] = exe
    report_url = "file://" + _quote_path(report)

    # Leave a few seconds of the limit for stopping the browser.
    deadline = t_start + max(5.0, args.timeout - 4.0)
    browser = Browser(exe, deadline)
    timed_out = False

    def on_alarm(signum, frame):
        raise Deadline()

    def on_term(signum, frame):
        raise SystemExit(EXIT_FAIL)

    old_alarm = signal.signal(signal.SIGALRM, on_alarm)
    old_term = signal.signal(signal.SIGTERM, on_term)
    signal.setitimer(signal.ITIMER_REAL, max(6.0, args.timeout - 2.0))  # backstop
    try:
        browser.start()
        run_checks(browser, report_url, args.screenshot, fail, stats, deadline, sweep=args.sweep)
    except Deadline:
        timed_out = True
        tail = browser.log_tail()
        fail("timeout", "the check did not finish within %.0f s%s" % (
            args.timeout, ("\n--- browser output ---\n" + tail) if tail else ""))
    except BrowserError as e:
        fail("browser", str(e))
    except OSError as e:
        fail("browser", "cannot run %s: %s" % (exe, e))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            browser.close(graceful=not timed_out)
        finally:
            signal.signal(signal.SIGALRM, old_alarm)
            signal.signal(signal.SIGTERM, old_term)
    if browser.session:
        check_events(browser.events, browser.session, fail, stats)

    stats["elapsed_s"] = round(time.monotonic() - t_start, 2)
    summary.update(stats)
    summary["ok"] = not failures
    if failures:
        summary["failures"] = failures
    print(json.dumps(summary, sort_keys=True))
    if failures:
        for msg in failures:
            print("check_report: FAIL: %s" % msg, file=sys.stderr)
        print("check_report: %d check(s) failed for %s" % (len(failures), report), file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def _quote_path(path):
    from urllib.parse import quote
    return quote(path, safe="/")


if __name__ == "__main__":
    sys.exit(main())

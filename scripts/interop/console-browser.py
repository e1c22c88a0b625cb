#!/usr/bin/env python3
"""Drives headless Chromium through the DevTools protocol, for the console's browser tests.

    console-browser.py URL [--chromium PATH] [--flag=CHROMIUM_FLAG]...

Chromium runs with `--remote-debugging-pipe` (the protocol over file descriptors 3 and 4, no port
and no package needed) and a fresh profile in a temporary directory, opened on URL. The driver
then reads one JSON command per line on standard input and answers each with one JSON line:

    {"op": "eval", "expr": "..."}                    -> {"value": ...}   (the expression's value)
    {"op": "wait", "expr": "...", "timeout": 60}     -> {"value": true} once truthy, or {"timeout": true, "value": false}
    {"op": "click", "selector": "#check"}            -> {"value": true}  (false: no such element)
    {"op": "viewport", "width": 390, "height": 844}  -> {"value": true}
    {"op": "colorScheme", "scheme": "dark"}          -> {"value": true}  (prefers-color-scheme)
    {"op": "screenshot", "path": "/tmp/x.png"}       -> {"value": bytes written}   ("wholePage": false: the viewport only)
    {"op": "console"}                                -> {"value": [messages the page logged, errors and CSP reports]}

A first line {"ready": true} (or {"error": ...}) says whether the page loaded. End of input
closes Chromium. Every wait is bounded; nothing here decides a test, it reports what it saw.
"""

import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Browser:
    def __init__(self, chromium, flags=()):
        self.profile = tempfile.mkdtemp(prefix="portico-console-browser.")
        to_child_read, self.to_child = os.pipe()
        self.from_child, from_child_write = os.pipe()

        def descriptors():
            # The protocol's descriptors are 3 (commands in) and 4 (answers out) in the child. Both
            # are first copied above 10, so that neither copy overwrites the other's source; dup2
            # leaves the copies without close-on-exec, and every other descriptor of ours has it.
            commands = fcntl.fcntl(to_child_read, fcntl.F_DUPFD, 10)
            answers = fcntl.fcntl(from_child_write, fcntl.F_DUPFD, 10)
            os.dup2(commands, 3)
            os.dup2(answers, 4)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--user-data-dir=" + self.profile, "--remote-debugging-pipe", "--window-size=1280,900", *flags, "about:blank"],
            close_fds=False, preexec_fn=descriptors,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_read)
        os.close(from_child_write)
        self.buffer = b""
        self.next_id = 0
        self.session = None
        self.logged = []

    # The bound only ends a test that has already failed: on a loaded 2-core machine Chromium
    # has taken over 30 s to answer Page.navigate (which it does once the document is committed).
    def send(self, method, params=None, session=True, timeout=120):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = self.read(deadline)
            if reply is None:
                break
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.event(reply)
        raise TimeoutError("no answer to %s" % method)

    def read(self, deadline):
        import select
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.from_child], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.from_child, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def event(self, message):
        method = message.get("method", "")
        params = message.get("params", {})
        if method == "Runtime.consoleAPICalled":
            self.logged.append({"kind": params.get("type"), "text": " ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", []))})
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.logged.append({"kind": "exception", "text": details.get("exception", {}).get("description", details.get("text", ""))})
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.logged.append({"kind": entry.get("level"), "text": entry.get("text", "")})

    def open(self, url):
        targets = self.send("Target.getTargets", session=False)["targetInfos"]
        page = next(target for target in targets if target["type"] == "page")
        self.session = self.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}, session=False)["sessionId"]
        for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.send(domain)
        self.send("Page.navigate", {"url": url})
        return self.wait("document.readyState === 'complete'", 120)

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"].get("exception", {}).get("description", "the expression threw"))
        return result.get("result", {}).get("value")

    def wait(self, expression, timeout):
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            # As a boolean: an element found is an object, which comes back by value as {}.
            value = self.evaluate("!!(%s)" % expression)
            if value:
                return {"value": value}
            # Events that arrived meanwhile (console messages) are kept.
            poll_until = time.monotonic() + 0.1
            while time.monotonic() < poll_until:
                reply = self.read(poll_until)
                if reply is None:
                    break
                self.event(reply)
        return {"timeout": True, "value": value}

    def close(self):
        try:
            self.process.terminate()
            self.process.wait(timeout=10)
        except Exception:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser") or "chromium")
    # Extra command-line flags for Chromium (`--ignore-certificate-errors` for a test CA, say).
    parser.add_argument("--flag", action="append", default=[])
    arguments = parser.parse_args()
    browser = Browser(arguments.chromium, arguments.flag)
    try:
        loaded = browser.open(arguments.url)
        print(json.dumps({"ready": True} if not loaded.get("timeout") else {"error": "the page did not load"}), flush=True)
        for line in sys.stdin:
            if not line.strip():
                continue
            command = json.loads(line)
            op = command["op"]
            try:
                if op == "eval":
                    answer = {"value": browser.evaluate(command["expr"])}
                elif op == "wait":
                    answer = browser.wait(command["expr"], float(command.get("timeout", 60)))
                elif op == "click":
                    selector = json.dumps(command["selector"])
                    answer = {"value": browser.evaluate("(() => { const e = document.querySelector(%s); if (!e) return false; e.click(); return true; })()" % selector)}
                elif op == "viewport":
                    browser.send("Emulation.setDeviceMetricsOverride", {
                        "width": int(command["width"]), "height": int(command["height"]), "deviceScaleFactor": 1,
                        "mobile": bool(command.get("mobile", False))})
                    answer = {"value": True}
                elif op == "colorScheme":
                    browser.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": command["scheme"]}]})
                    answer = {"value": True}
                elif op == "screenshot":
                    whole = bool(command.get("wholePage", True))
                    data = base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": whole})["data"])
                    with open(command["path"], "wb") as file:
                        file.write(data)
                    answer = {"value": len(data)}
                elif op == "console":
                    answer = {"value": browser.logged}
                else:
                    answer = {"error": "unknown op " + op}
            except Exception as error:  # reported, never fatal: the test decides
                answer = {"error": str(error)}
            # The command's own number, so that the caller can tell its answer from any other.
            if "seq" in command:
                answer["seq"] = command["seq"]
            print(json.dumps(answer), flush=True)
            if os.environ.get("PORTICO_BROWSER_LOG"):
                with open(os.environ["PORTICO_BROWSER_LOG"], "a") as log:
                    log.write(line.strip() + "\n  -> " + json.dumps(answer) + "\n")
    except Exception as error:
        print(json.dumps({"error": str(error)}), flush=True)
    finally:
        browser.close()


if __name__ == "__main__":
    main()

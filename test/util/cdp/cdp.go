// Package cdp drives a headless Chromium through the Chrome DevTools
// Protocol, for the dashboard's browser tests (make browser-test): launch
// it, open a page, navigate, evaluate JavaScript, press keys, take
// screenshots, and collect what the page logged as errors (script errors,
// Content-Security-Policy violations, failed loads). Nothing but the
// protocol's JSON over one WebSocket (gorilla/websocket, already a module
// of the build); no browser download: the Chromium of the system.
package cdp

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Browser is a running Chromium and the connection to it.
type Browser struct {
	cmd  *exec.Cmd
	conn *websocket.Conn
	next atomic.Int64

	mu      sync.Mutex
	pending map[int64]chan message
	logs    map[string][]string // by session: errors the page logged
	closed  bool
	wmu     sync.Mutex
}

type message struct {
	ID        int64                     `json:"id,omitempty"`
	Method    string                    `json:"method,omitempty"`
	Params    json.RawMessage           `json:"params,omitempty"`
	Result    json.RawMessage           `json:"result,omitempty"`
	Error     *struct{ Message string } `json:"error,omitempty"`
	SessionID string                    `json:"sessionId,omitempty"`
}

// Flags are the command line of a headless, quiet Chromium: nothing
// reaches the internet on its own.
func Flags(userDataDir string) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-default-apps", "--no-default-browser-check", "--hide-scrollbars", "--mute-audio",
		"--user-data-dir=" + userDataDir, "--remote-debugging-port=0", "about:blank"}
}

var listening = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// Launch starts Chromium at path with a fresh profile in userDataDir and
// connects to it. stderr gets the browser's own log.
func Launch(ctx context.Context, path, userDataDir string, stderr io.Writer) (*Browser, error) {
	cmd := exec.Command(path, Flags(userDataDir)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if m := listening.FindStringSubmatch(line); m != nil && !sent {
				found <- m[1]
				sent = true
			}
			if stderr != nil {
				fmt.Fprintln(stderr, line)
			}
		}
		if !sent {
			close(found)
		}
	}()
	var url string
	select {
	case u, ok := <-found:
		if !ok {
			_ = cmd.Wait()
			return nil, errors.New("chromium exited before it listened for DevTools")
		}
		url = u
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return nil, errors.New("chromium did not listen for DevTools within a minute")
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, ctx.Err()
	}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	conn.SetReadLimit(256 << 20) // screenshots
	b := &Browser{cmd: cmd, conn: conn, pending: map[int64]chan message{}, logs: map[string][]string{}}
	go b.read()
	return b, nil
}

func (b *Browser) read() {
	for {
		var m message
		if err := b.conn.ReadJSON(&m); err != nil {
			b.mu.Lock()
			b.closed = true
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.pending[m.ID]
			delete(b.pending, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		if s := logged(m); s != "" {
			b.mu.Lock()
			b.logs[m.SessionID] = append(b.logs[m.SessionID], s)
			b.mu.Unlock()
		}
	}
}

// logged is what an event says went wrong on the page, or "".
func logged(m message) string {
	switch m.Method {
	case "Runtime.exceptionThrown":
		var p struct {
			ExceptionDetails struct {
				Text      string
				Exception struct{ Description string }
			}
		}
		_ = json.Unmarshal(m.Params, &p)
		return "exception: " + p.ExceptionDetails.Text + " " + p.ExceptionDetails.Exception.Description
	case "Log.entryAdded":
		var p struct {
			Entry struct{ Level, Source, Text, URL string }
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Entry.Level == "error" {
			return fmt.Sprintf("%s: %s %s", p.Entry.Source, p.Entry.Text, p.Entry.URL)
		}
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string
			Args []struct {
				Value       any
				Description string
			}
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Type == "error" || p.Type == "assert" {
			var parts []string
			for _, a := range p.Args {
				parts = append(parts, fmt.Sprint(a.Value, a.Description))
			}
			return "console." + p.Type + ": " + strings.Join(parts, " ")
		}
	}
	return ""
}

// call sends one command (to a page's session, or the browser's when
// session is "") and decodes its result into out.
func (b *Browser) call(ctx context.Context, session, method string, params, out any) error {
	id := b.next.Add(1)
	ch := make(chan message, 1)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errors.New("the browser connection is closed")
	}
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	b.wmu.Lock()
	err := b.conn.WriteJSON(msg)
	b.wmu.Unlock()
	if err != nil {
		return err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return errors.New("the browser connection closed")
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Close ends the browser.
func (b *Browser) Close() {
	_ = b.call(context.Background(), "", "Browser.close", nil, nil)
	_ = b.conn.Close()
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}

// Page is one tab.
type Page struct {
	b       *Browser
	session string
}

// NewPage opens a tab of width x height CSS pixels.
func (b *Browser) NewPage(ctx context.Context, width, height int) (*Page, error) {
	var target struct{ TargetID string }
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var att struct{ SessionID string }
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		return nil, err
	}
	p := &Page{b: b, session: att.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		if err := p.call(ctx, m, nil, nil); err != nil {
			return nil, err
		}
	}
	if err := p.SetViewport(ctx, width, height); err != nil {
		return nil, err
	}
	return p, nil
}

// SetViewport sets the page's size in CSS pixels.
func (p *Page) SetViewport(ctx context.Context, width, height int) error {
	return p.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
}

func (p *Page) call(ctx context.Context, method string, params, out any) error {
	return p.b.call(ctx, p.session, method, params, out)
}

// Navigate loads url.
func (p *Page) Navigate(ctx context.Context, url string) error {
	var r struct{ ErrorText string }
	if err := p.call(ctx, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("navigating to %s: %s", url, r.ErrorText)
	}
	return nil
}

// Eval evaluates a JavaScript expression (awaiting a promise) and decodes
// its value into out.
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails *struct {
			Text      string
			Exception struct{ Description string }
		}
	}
	if err := p.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("evaluating %q: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if out != nil && len(r.Result.Value) > 0 {
		return json.Unmarshal(r.Result.Value, out)
	}
	return nil
}

// WaitFor evaluates expr until it is true, or fails after timeout.
func (p *Page) WaitFor(ctx context.Context, expr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		var ok bool
		last = p.Eval(ctx, "Boolean("+expr+")", &ok)
		if last == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("waiting for %s: %w", expr, last)
			}
			return fmt.Errorf("%s was not true within %v", expr, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Key presses a key ("ArrowRight", "Enter", "Tab", "+") on the focused
// element.
func (p *Page) Key(ctx context.Context, key string) error {
	code, text := key, ""
	vk := map[string]int{"Enter": 13, "Tab": 9, "Escape": 27, "ArrowLeft": 37, "ArrowUp": 38, "ArrowRight": 39, "ArrowDown": 40, "Home": 36, "End": 35, " ": 32}[key]
	if len([]rune(key)) == 1 {
		text = key
	}
	if key == "Enter" {
		text = "\r"
	}
	for _, typ := range []string{"keyDown", "keyUp"} {
		params := map[string]any{"type": typ, "key": key, "code": code, "windowsVirtualKeyCode": vk}
		if typ == "keyDown" && text != "" {
			params["text"] = text
		}
		if err := p.call(ctx, "Input.dispatchKeyEvent", params, nil); err != nil {
			return err
		}
	}
	return nil
}

// Screenshot writes the page (the whole of it when full) as a PNG file.
func (p *Page) Screenshot(ctx context.Context, file string, full bool) error {
	var r struct{ Data string }
	params := map[string]any{"format": "png", "captureBeyondViewport": full}
	if full {
		var size struct{ W, H float64 }
		if err := p.Eval(ctx, "({W: document.documentElement.scrollWidth, H: document.documentElement.scrollHeight})", &size); err != nil {
			return err
		}
		params["clip"] = map[string]any{"x": 0, "y": 0, "width": size.W, "height": size.H, "scale": 1}
	}
	if err := p.call(ctx, "Page.captureScreenshot", params, &r); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return err
	}
	return os.WriteFile(file, png, 0o644)
}

// Errors are what the page logged as errors so far.
func (p *Page) Errors() []string {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	return append([]string(nil), p.b.logs[p.session]...)
}

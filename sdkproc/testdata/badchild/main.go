// Command badchild is a misbehaving child runtime for the sdkproc tests. It speaks the wire
// protocol with package wire; its first argument picks the misbehaviour:
//
//	echo         a proper run: the answer is a JSON report of what the child got (initialize
//	             params, cwd, environment)
//	hang         never reads stdin and never answers (handshake hangs; default SIGTERM kills it)
//	exit3        writes a stderr line and exits 3 before the handshake
//	stall        answers, streams "partial answer" after the receipt, then never goes idle;
//	             exits on shutdown or stdin EOF like the real runtime
//	ignore-eof   like stall, but does not answer shutdown and survives stdin EOF
//	ignore-term  like ignore-eof, and also ignores SIGTERM
//	garbage      writes garbage lines and a 10 MB line before behaving like echo
//	garbage-only writes garbage lines and never answers (the handshake never completes)
//	term-grandchild  ignores SIGTERM, starts a grandchild in its process group that ignores
//	             SIGTERM too (its pid on stderr: "grandchild <pid>"), and never answers
//	malformed    streams "partial " and then a final assistant/message whose content is no array
//	noturn       settles idle right after the receipt, without any turn
//	prereceipt   streams "LEAKED" before the receipt, and sends the whole turn before the
//	             session/prompt response
//	die          streams "partial " after the receipt, then exits 1 without going idle
//	noidentity   answers initialize without serverInfo
//	nomessageid  answers session/prompt without messageId
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/internal/wire"
)

func main() {
	mode := ""
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "hang":
		sleepForever()
	case "garbage-only":
		os.Stdout.WriteString("not json at all\n[1,2,3]\n{\"neither\":\"id nor method\"}\n{broken\n")
		sleepForever()
	case "term-grandchild":
		signal.Ignore(syscall.SIGTERM)
		gc := exec.Command(os.Args[0], "ignore-term-hang")
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "badchild: start grandchild:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "grandchild %d\n", gc.Process.Pid)
		sleepForever()
	case "ignore-term-hang":
		signal.Ignore(syscall.SIGTERM)
		sleepForever()
	case "exit3":
		fmt.Fprintln(os.Stderr, "badchild: fatal: cannot load configuration")
		os.Exit(3)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
	case "garbage":
		var b bytes.Buffer
		b.WriteString("not json at all\n\n[1,2,3]\n{\"neither\":\"id nor method\"}\n\"a string\"\n{broken\n")
		b.WriteString("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"")
		b.Write(bytes.Repeat([]byte("x"), 10<<20))
		b.WriteString("\"}\n")
		os.Stdout.Write(b.Bytes())
	}
	c := &child{mode: mode}
	c.conn = wire.NewConn(os.Stdin, os.Stdout, wire.Options{})
	c.conn.Handle(wire.MethodInitialize, c.initialize)
	c.conn.Handle(wire.MethodSessionPrompt, c.prompt)
	if mode != "ignore-eof" && mode != "ignore-term" {
		c.conn.Handle(wire.MethodShutdown, func(context.Context, json.RawMessage) (any, error) {
			go func() { time.Sleep(10 * time.Millisecond); os.Exit(0) }()
			return struct{}{}, nil
		})
	}
	c.conn.Start()
	<-c.conn.Done()
	if mode == "ignore-eof" || mode == "ignore-term" {
		sleepForever()
	}
}

// sleepForever blocks without tripping the runtime's deadlock detector, which a bare
// select {} would.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

type child struct {
	mode  string
	conn  *wire.Conn
	inits []json.RawMessage
	seq   int64
}

func (c *child) initialize(_ context.Context, params json.RawMessage) (any, error) {
	c.inits = append(c.inits, params)
	if c.mode == "noidentity" {
		return map[string]any{"hello": "world"}, nil
	}
	return wire.InitializeResult{ServerInfo: wire.ServerInfo{Name: wire.ServerName, Version: "badchild"}}, nil
}

func (c *child) prompt(_ context.Context, params json.RawMessage) (any, error) {
	var p wire.PromptParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	if c.mode == "nomessageid" {
		return map[string]any{"messageId": 42}, nil
	}
	const msgID = "msg-1"
	if c.mode == "prereceipt" {
		// Everything before the response: the client must already be listening.
		c.delta(p.SessionID, "LEAKED")
		c.turn(p, msgID)
		return wire.PromptResult{MessageID: msgID}, nil
	}
	go func() {
		time.Sleep(20 * time.Millisecond) // after the response, as the real runtime does
		c.turn(p, msgID)
	}()
	return wire.PromptResult{MessageID: msgID}, nil
}

// turn plays the session's answer to the prompt, per mode.
func (c *child) turn(p wire.PromptParams, msgID string) {
	sid := p.SessionID
	c.status(sid, wire.StatusRunning)
	c.event(sid, session.TypeInboxSpliced, session.InboxSplicedData{
		Target: "agent", Inserted: []session.UserMessage{{ID: msgID, Role: "user", Content: p.ContentBlocks}},
	})
	if c.mode == "noturn" {
		c.status(sid, wire.StatusIdle)
		return
	}
	c.event(sid, session.TypeTurnStart, session.TurnStartData{Turn: 0})
	c.event(sid, session.TypeStepStart, session.StepData{Turn: 0})
	switch c.mode {
	case "stall", "ignore-eof", "ignore-term":
		c.delta(sid, "partial answer")
		return
	case "die":
		c.delta(sid, "partial ")
		time.Sleep(20 * time.Millisecond)
		os.Exit(1)
	case "malformed":
		c.delta(sid, "partial ")
		c.event(sid, session.TypeAssistantMessage, map[string]any{
			"turn": 0, "step": 0, "message": map[string]any{"id": "a1", "role": "assistant", "content": "not an array"},
		})
		c.end(sid, session.EndCompleted)
		return
	}
	if c.mode == "prereceipt" {
		c.delta(sid, "ok")
		c.end(sid, session.EndCompleted)
		return
	}
	text := c.report()
	c.delta(sid, text)
	c.event(sid, session.TypeAssistantMessage, session.AssistantMessageData{
		Message: session.AssistantMessage{ID: "a1", Role: "assistant", Content: []session.Block{session.Text(text)}},
		Usage:   &session.Usage{InputTokens: 10, OutputTokens: 7},
	})
	c.end(sid, session.EndCompleted)
}

// report is the echo answer: what the child was given.
func (c *child) report() string {
	cwd, _ := os.Getwd()
	env := map[string]string{}
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		env[name] = value
	}
	b, _ := json.Marshal(map[string]any{"initialize": c.inits, "cwd": cwd, "env": env})
	return string(b)
}

func (c *child) end(sid, kind string) {
	c.event(sid, session.TypeStepEnd, session.StepData{Turn: 0})
	c.event(sid, session.TypeTurnEnd, session.TurnEndData{Turn: 0, Reason: session.EndReason{Kind: kind}})
	c.status(sid, wire.StatusIdle)
}

func (c *child) delta(sid, text string) {
	c.event(sid, session.TypeAssistantChunk, session.AssistantChunkData{
		Chunk: session.Chunk{Type: session.ChunkTextDelta, Text: text},
	})
}

func (c *child) event(sid, typ string, data any) {
	ev, err := session.NewEvent(typ, data)
	if err != nil {
		panic(err)
	}
	ev.Seq = c.seq
	c.seq++
	raw, _ := json.Marshal(ev)
	c.conn.Notify(wire.NotifySessionEvent, wire.SessionEventParams{SessionID: sid, Event: raw})
}

func (c *child) status(sid, status string) {
	c.conn.Notify(wire.NotifySessionStatus, wire.SessionStatusParams{SessionID: sid, Status: status})
}

// Package wire is the JSON-RPC 2.0 over stdio framing shared by the SDK
// subprocess provider (client side) and the child runtime (server side).
//
// The framing follows contract R-60: one compact JSON object per
// newline-terminated line. Readers skip blank lines, ignore lines that are
// not JSON objects, and discard lines longer than a configured maximum while
// streaming them, so a misbehaving peer can neither stop the connection nor
// make it hold an unbounded line in memory.
//
// Maintained JSON-RPC libraries were considered and not used: they decode
// with a streaming json.Decoder, which cannot resynchronise after a garbage
// line and has no per-frame size bound, and they report a single generic
// "connection closed" error where the protocol distinguishes input EOF
// from a local close.
package wire

import (
	"encoding/json"
	"errors"
)

// Version is the value of the "jsonrpc" member of every frame written.
const Version = "2.0"

// Error codes used by this package; any other code a handler chooses is
// passed through unchanged.
const (
	CodeMethodNotFound = -32601
	CodeInternalError  = -32603
)

var (
	// ErrInputClosed fails pending calls when the peer's output ends (EOF or
	// a read error). Its message is exactly "JSON-RPC input closed".
	ErrInputClosed = errors.New("JSON-RPC input closed")

	// ErrTransportClosed fails pending and later calls once Conn.Close has
	// been called. Its message is exactly "JSON-RPC transport closed".
	ErrTransportClosed = errors.New("JSON-RPC transport closed")

	// ErrFrameTooLarge is wrapped by the diagnostic reported for a line
	// longer than the maximum frame size.
	ErrFrameTooLarge = errors.New("frame exceeds maximum size")
)

// Kind classifies a message by the members present, per contract R-60.
type Kind int

const (
	// KindInvalid is a message with neither id nor method; the decoder
	// never returns one.
	KindInvalid Kind = iota
	// KindRequest has both id and method.
	KindRequest
	// KindResponse has an id and no method.
	KindResponse
	// KindNotification has a method and no id.
	KindNotification
)

// Message is one JSON-RPC 2.0 frame. ID, Params and Result are kept raw so
// that ids keep their JSON type (number or string) and payloads are decoded
// only by whoever consumes them. A present JSON null is kept as the raw
// bytes "null"; an absent member is nil.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Kind reports whether m is a request, a response or a notification.
func (m *Message) Kind() Kind {
	switch {
	case m.ID != nil && m.Method != "":
		return KindRequest
	case m.ID != nil:
		return KindResponse
	case m.Method != "":
		return KindNotification
	}
	return KindInvalid
}

// Error is the error member of a response. Conn.Call returns a *Error when
// the peer answers with one, and a handler may return a *Error (possibly
// wrapped) to choose the code and data sent.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error returns the peer's message unchanged, so user-visible strings
// produced by the child runtime reach the caller byte for byte.
func (e *Error) Error() string { return e.Message }

// RuleData is the data of an error answer that is a rejection of the request: the rule of
// the contract it broke (a subagent rule name), read back by Rule.
func RuleData(rule string) json.RawMessage {
	data, _ := json.Marshal(struct {
		Rule string `json:"rule"`
	}{rule})
	return data
}

// Rule returns the rejection rule the error's data names (RuleData), "" when it names none.
func (e *Error) Rule() string {
	var data struct {
		Rule string `json:"rule"`
	}
	if json.Unmarshal(e.Data, &data) != nil {
		return ""
	}
	return data.Rule
}

package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

// sessionEvent is a typical session.event notification (about 300 bytes on
// the wire): one streamed assistant chunk.
var sessionEvent = json.RawMessage(`{"sessionId":"ses_01JZ8Q4W6V3M2N7K5R9T1X0YBC","event":{"type":"assistant/chunk","seq":1284,"time":"2026-05-04T10:21:33.512Z","data":{"text":"Here is the plan: read the failing test, reproduce it, then fix the parser so that CRLF line endings are handled."}}}`)

// BenchmarkCodec measures encode+decode of one session.event frame.
func BenchmarkCodec(b *testing.B) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	dec := NewDecoder(&buf, DecoderOptions{})
	msg := &Message{Method: "session.event", Params: sessionEvent}
	if err := enc.Encode(msg); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	if _, err := dec.Decode(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := enc.Encode(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := dec.Decode(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkConnNotify measures notifications from one Conn to another over
// an io.Pipe, including marshalling the params and the ordered delivery.
func BenchmarkConnNotify(b *testing.B) {
	r, w := io.Pipe()
	sender := NewConn(eofReader{}, w, Options{Closer: w})
	receiver := NewConn(r, io.Discard, Options{})
	received := make(chan struct{}, 1024)
	receiver.OnNotify(func(string, json.RawMessage) { received <- struct{}{} })
	receiver.Start()
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for range b.N {
			if err := sender.Notify("session.event", sessionEvent); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	for range b.N {
		<-received
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
	sender.Close()
	<-receiver.Done()
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

package store_test

import (
	"context"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/store"
)

// node is one name of the drawing: a bucket (children) or a key.
type node struct {
	name     string
	bucket   bool
	children []*node
	seen     bool
}

// drawing parses the bucket tree out of the package comment in doc.go:
// its indented lines, two spaces a level, "name/" a bucket, "<…>" any name.
func drawing(t *testing.T) *node {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil || f.Doc == nil {
		t.Fatalf("doc.go: %v (package comment present: %v)", err, f != nil && f.Doc != nil)
	}
	root := &node{bucket: true}
	stack := []*node{root}
	in := false
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		if line == "# Schema" {
			in = true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "\t") {
			if len(root.children) > 0 && strings.TrimSpace(line) != "" {
				break // the prose after the drawing
			}
			continue
		}
		body := strings.TrimPrefix(line, "\t")
		trimmed := strings.TrimLeft(body, " ")
		depth := (len(body) - len(trimmed)) / 2
		name, _, _ := strings.Cut(trimmed, " ")
		if depth+1 > len(stack) {
			t.Fatalf("drawing line %q is indented past its parent", line)
		}
		stack = stack[:depth+1]
		n := &node{name: strings.TrimSuffix(name, "/"), bucket: strings.HasSuffix(name, "/")}
		parent := stack[depth]
		parent.children = append(parent.children, n)
		stack = append(stack, n)
	}
	if len(root.children) == 0 {
		t.Fatal("no bucket tree under \"# Schema\" in doc.go")
	}
	return root
}

// match is the drawn child that stands for the stored name: its own name,
// else the one <placeholder> of that level.
func (n *node) match(name string, bucket bool) *node {
	var any *node
	for _, c := range n.children {
		if c.bucket != bucket {
			continue
		}
		if c.name == name {
			return c
		}
		if strings.HasPrefix(c.name, "<") {
			any = c
		}
	}
	return any
}

// TestSchemaDrawing: a freshly opened store, with one session written by
// every package that owns a part of the file (a record, a lease, a journal
// row carrying a clientMessageId), holds exactly the buckets and keys the
// package comment draws. A change to the tree without a change to the
// drawing (and so, by the rule there, a migration and its test) is red.
func TestSchemaDrawing(t *testing.T) {
	want := drawing(t)
	s, err := store.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const id = "s_schema"
	if err := s.PutRecord(store.Record{ID: id, Provider: "echo", Cwd: "/", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRuntime(store.RuntimeRecord{ID: "r_schema", Profile: "codex", Account: "default", Sessions: []string{id}}); err != nil {
		t.Fatal(err)
	}
	leases := lease.New(s.DB, func(lease.Owner) lease.Liveness { return lease.Alive }, time.Now)
	if _, err := leases.Acquire(id); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(s.DB, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = j.Append(context.Background(), id, event.New(event.TurnStarted, "t1",
		event.TurnStartedData{TurnID: "t1", Text: "hi", ClientMessageID: "m1"}))
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	var walk func(b *bolt.Bucket, drawn *node, path string)
	walk = func(b *bolt.Bucket, drawn *node, path string) {
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			p := path + string(k)
			n := drawn.match(string(k), v == nil)
			if n == nil {
				t.Errorf("%s%s is in the store but not drawn in doc.go (change the drawing, add a migration and its test)",
					p, map[bool]string{true: "/"}[v == nil])
				continue
			}
			n.seen = true
			if v == nil {
				walk(b.Bucket(k), n, p+"/")
			}
		}
	}
	err = s.DB.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			n := want.match(string(name), true)
			if n == nil {
				t.Errorf("%s/ is in the store but not drawn in doc.go", name)
				return nil
			}
			n.seen = true
			walk(b, n, string(name)+"/")
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	var unseen func(n *node, path string)
	unseen = func(n *node, path string) {
		for _, c := range n.children {
			p := path + c.name
			if c.bucket {
				p += "/"
			}
			if !c.seen {
				t.Errorf("%s is drawn in doc.go but not in a fresh store", p)
			}
			unseen(c, p)
		}
	}
	unseen(want, "")
}

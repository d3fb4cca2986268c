package inspect

import (
	"sync"
	"time"
)

// ttlCache serves an answer built at most ttl ago, and builds it once for
// callers that ask at the same time.
type ttlCache struct {
	mu      sync.Mutex
	entries map[string]*cached
}

type cached struct {
	ready chan struct{} // closed once val is set
	at    time.Time
	val   any
}

// maxCacheEntries bounds the keys (the tree per VC filter is one each).
const maxCacheEntries = 1024

func newTTLCache() *ttlCache { return &ttlCache{entries: map[string]*cached{}} }

func (c *ttlCache) get(key string, ttl time.Duration, build func() any) any {
	c.mu.Lock()
	e := c.entries[key]
	if e != nil {
		select {
		case <-e.ready:
			if time.Since(e.at) >= ttl {
				e = nil // stale: build anew
			}
		default: // being built: wait for it
		}
	}
	if e == nil {
		if len(c.entries) >= maxCacheEntries {
			for k, old := range c.entries {
				select {
				case <-old.ready:
					if time.Since(old.at) >= ttl {
						delete(c.entries, k)
					}
				default:
				}
			}
		}
		e = &cached{ready: make(chan struct{})}
		c.entries[key] = e
		c.mu.Unlock()
		defer close(e.ready)
		e.val = build()
		e.at = time.Now()
		return e.val
	}
	c.mu.Unlock()
	<-e.ready
	return e.val
}

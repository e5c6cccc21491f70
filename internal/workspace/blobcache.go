package workspace

import (
	"container/list"
	"sync"
)

// blobCache keeps recently read contents in memory, up to a number of
// bytes, evicting the least recently used. Contents never change under a
// hash, so an entry is never stale.
type blobCache struct {
	mu    sync.Mutex
	max   int64
	bytes int64
	order *list.List // of *blobItem, most recent first
	items map[string]*list.Element
}

type blobItem struct {
	hash string
	data []byte
}

func newBlobCache(max int64) *blobCache {
	return &blobCache{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *blobCache) get(hash string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[hash]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*blobItem).data, true
}

// put keeps data unless it alone is over a quarter of the cache.
func (c *blobCache) put(hash string, data []byte) {
	size := int64(len(data))
	if size > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[hash]; ok {
		return
	}
	c.items[hash] = c.order.PushFront(&blobItem{hash: hash, data: data})
	c.bytes += size
	for c.bytes > c.max {
		last := c.order.Back()
		it := last.Value.(*blobItem)
		c.order.Remove(last)
		delete(c.items, it.hash)
		c.bytes -= int64(len(it.data))
	}
}

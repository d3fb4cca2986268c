package cellcore

import "math/bits"

// bucketSet holds cells keyed by a small non-negative integer (a free leaf
// count, or a binding penalty), with O(1) insert, remove and re-key, and a
// bitmap of non-empty buckets so that "the first cell with key >= k" costs a
// few word scans. A cell is in at most one bucketSet per membership kind; its
// position and key for that kind live in the cell itself, so the index
// allocates nothing per operation once its buckets have grown.
type bucketSet struct {
	kind     int
	buckets  [][]*Cell
	nonEmpty []uint64
	size     int
}

func newBucketSet(kind int, maxKey int32) *bucketSet {
	n := int(maxKey) + 1
	return &bucketSet{kind: kind, buckets: make([][]*Cell, n), nonEmpty: make([]uint64, (n+63)/64)}
}

func (b *bucketSet) clampKey(k int32) int32 {
	if k < 0 {
		return 0
	}
	if int(k) >= len(b.buckets) {
		return int32(len(b.buckets) - 1)
	}
	return k
}

func (b *bucketSet) add(c *Cell, key int32) {
	key = b.clampKey(key)
	bk := b.buckets[key]
	c.pos[b.kind] = int32(len(bk))
	c.key[b.kind] = key
	b.buckets[key] = append(bk, c)
	b.nonEmpty[key>>6] |= 1 << (uint(key) & 63)
	b.size++
}

func (b *bucketSet) remove(c *Cell) {
	key := c.key[b.kind]
	bk := b.buckets[key]
	i := c.pos[b.kind]
	last := bk[len(bk)-1]
	bk[i] = last
	last.pos[b.kind] = i
	bk[len(bk)-1] = nil
	bk = bk[:len(bk)-1]
	b.buckets[key] = bk
	if len(bk) == 0 {
		b.nonEmpty[key>>6] &^= 1 << (uint(key) & 63)
	}
	c.pos[b.kind] = -1
	b.size--
}

func (b *bucketSet) rekey(c *Cell, key int32) {
	key = b.clampKey(key)
	if c.key[b.kind] == key {
		return
	}
	b.remove(c)
	b.add(c, key)
}

// next returns the first non-empty bucket key >= k, or -1.
func (b *bucketSet) next(k int32) int32 {
	if k < 0 {
		k = 0
	}
	if int(k) >= len(b.buckets) {
		return -1
	}
	w := int(k >> 6)
	word := b.nonEmpty[w] &^ ((1 << (uint(k) & 63)) - 1)
	for {
		if word != 0 {
			return int32(w<<6 + bits.TrailingZeros64(word))
		}
		w++
		if w >= len(b.nonEmpty) {
			return -1
		}
		word = b.nonEmpty[w]
	}
}

// prev returns the last non-empty bucket key <= k, or -1.
func (b *bucketSet) prev(k int32) int32 {
	if int(k) >= len(b.buckets) {
		k = int32(len(b.buckets) - 1)
	}
	if k < 0 {
		return -1
	}
	w := int(k >> 6)
	word := b.nonEmpty[w] & (^uint64(0) >> (63 - uint(k)&63))
	for {
		if word != 0 {
			return int32(w<<6 + 63 - bits.LeadingZeros64(word))
		}
		w--
		if w < 0 {
			return -1
		}
		word = b.nonEmpty[w]
	}
}

// each visits cells in ascending key order from key k, until fn returns false.
func (b *bucketSet) each(k int32, fn func(*Cell) bool) bool {
	for key := b.next(k); key >= 0; key = b.next(key + 1) {
		bk := b.buckets[key]
		for i := 0; i < len(bk); i++ {
			if !fn(bk[i]) {
				return false
			}
		}
	}
	return true
}

func (b *bucketSet) contains(c *Cell) bool {
	p := c.pos[b.kind]
	if p < 0 {
		return false
	}
	k := c.key[b.kind]
	return int(k) < len(b.buckets) && int(p) < len(b.buckets[k]) && b.buckets[k][p] == c
}

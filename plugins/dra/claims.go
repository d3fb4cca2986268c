package dra

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// Claims tracks which devices of the GPU driver are allocated, and to which
// claims: from the ResourceClaim informer, and the allocations this
// scheduler process made and has not written yet (its profile's
// DynamicResources between its Reserve and PreBind). A node's claimed
// devices are the core's input NodeDevices.Claimed: a claimed leaf no group
// of the core holds is taken. It never calls the API server.
type Claims struct {
	slices *Slices

	mu       sync.Mutex
	byUID    map[types.UID]*allocatedClaim
	byDevice map[deviceKey]sets.Set[types.UID]
	// pending: allocations this process made and the informer does not
	// show yet, by claim (SetPending).
	pending map[types.UID][]deviceKey
	// ours: claims hivesched allocated (written or being written).
	ours map[types.UID]bool
	// announced: foreign claims told (by an event) that they are counted.
	announced map[types.UID]bool
}

// allocatedClaim is an allocated claim with devices of the driver.
type allocatedClaim struct {
	name      string // namespace/name
	devices   []deviceKey
	consumers []resourceapi.ResourceClaimConsumerReference
}

// NewClaims tracks claims whose devices slices map to leaf cells.
func NewClaims(slices *Slices) *Claims {
	return &Claims{slices: slices, byUID: map[types.UID]*allocatedClaim{}, byDevice: map[deviceKey]sets.Set[types.UID]{},
		pending: map[types.UID][]deviceKey{}, ours: map[types.UID]bool{}, announced: map[types.UID]bool{}}
}

// Update records a claim's allocation (added, changed, deleted; an
// unallocated claim holds nothing) and returns the nodes whose claimed
// devices changed.
func (c *Claims) Update(claim *resourceapi.ResourceClaim, deleted bool) []string {
	var devs []deviceKey
	if !deleted && claim.Status.Allocation != nil {
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver == c.slices.Driver() {
				devs = append(devs, deviceKey{r.Pool, r.Device})
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	nodes := sets.New[string]()
	old := c.byUID[claim.UID]
	if old != nil {
		for _, d := range old.devices {
			if s := c.byDevice[d]; s != nil {
				s.Delete(claim.UID)
				if s.Len() == 0 {
					delete(c.byDevice, d)
				}
			}
			c.addNode(nodes, d)
		}
		delete(c.byUID, claim.UID)
	}
	if deleted {
		for _, d := range c.pending[claim.UID] {
			c.addNode(nodes, d)
		}
		delete(c.pending, claim.UID)
	}
	if len(devs) == 0 {
		if deleted || old != nil {
			// Gone, or released: whoever allocates it next is not known.
			delete(c.ours, claim.UID)
			delete(c.announced, claim.UID)
		}
		return sets.List(nodes)
	}
	c.byUID[claim.UID] = &allocatedClaim{name: claim.Namespace + "/" + claim.Name, devices: devs, consumers: claim.Status.ReservedFor}
	for _, d := range devs {
		if c.byDevice[d] == nil {
			c.byDevice[d] = sets.New[types.UID]()
		}
		c.byDevice[d].Insert(claim.UID)
		c.addNode(nodes, d)
	}
	for _, d := range c.pending[claim.UID] {
		c.addNode(nodes, d)
	}
	delete(c.pending, claim.UID) // written: the informer shows it
	return sets.List(nodes)
}

func (c *Claims) addNode(nodes sets.Set[string], d deviceKey) {
	if n, _, ok := c.slices.Leaf(d.pool, d.name); ok {
		nodes.Insert(n)
	}
}

// SetPending records an allocation this process made for a claim and has
// not written yet (the profile's DynamicResources between its Reserve and
// PreBind, read from the shared DRA manager's pending allocation): its
// devices are claimed until the informer shows the claim allocated, or it
// is dropped (Unreserve). It returns the nodes whose claimed devices
// changed.
func (c *Claims) SetPending(uid types.UID, alloc *resourceapi.AllocationResult) []string {
	var devs []deviceKey
	if alloc != nil {
		for _, r := range alloc.Devices.Results {
			if r.Driver == c.slices.Driver() {
				devs = append(devs, deviceKey{r.Pool, r.Device})
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	nodes := sets.New[string]()
	for _, d := range c.pending[uid] {
		c.addNode(nodes, d)
	}
	delete(c.pending, uid)
	if len(devs) > 0 && c.byUID[uid] == nil {
		c.pending[uid] = devs
		for _, d := range devs {
			c.addNode(nodes, d)
		}
	}
	return sets.List(nodes)
}

// Claimed lists the node's claimed leaves: devices that an allocated claim
// or an allocation in flight holds.
func (c *Claims) Claimed(node string) []cellcore.DeviceRef {
	devs := c.slices.Devices(node)
	c.mu.Lock()
	defer c.mu.Unlock()
	pending := sets.New[deviceKey]()
	for _, ds := range c.pending {
		pending.Insert(ds...)
	}
	var out []cellcore.DeviceRef
	for idx, d := range devs {
		k := deviceKey{d.Pool, d.Name}
		if c.byDevice[k] != nil || pending.Has(k) {
			out = append(out, cellcore.DeviceRef{Index: idx})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// Allocated reports whether the claim holds devices of the driver.
func (c *Claims) Allocated(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byUID[uid] != nil
}

// SetOurs marks a claim as allocated by hivesched (ours) or not.
func (c *Claims) SetOurs(uid types.UID, ours bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ours {
		c.ours[uid] = true
	} else {
		delete(c.ours, uid)
	}
}

// Ours reports whether hivesched allocated the claim.
func (c *Claims) Ours(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ours[uid]
}

// Holders names the claims other than except that hold any of the devices
// (driver, pool, device) of a leaf of node.
func (c *Claims) Holders(node string, indices []int32, except types.UID) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, idx := range indices {
		d, ok := c.slices.Device(node, idx)
		if !ok {
			continue
		}
		for uid := range c.byDevice[deviceKey{d.Pool, d.Name}] {
			if uid != except {
				out = append(out, c.byUID[uid].name+" ("+d.Name+")")
			}
		}
	}
	sort.Strings(out)
	return out
}

// Foreign is an allocated claim hivesched did not allocate that holds
// devices of leaf cells.
type Foreign struct {
	UID       types.UID
	Name      string // namespace/name
	Node      string
	Devices   []string
	Consumers []resourceapi.ResourceClaimConsumerReference
}

// ForeignClaim returns the claim if it holds leaf devices and is not ours.
func (c *Claims) ForeignClaim(uid types.UID) (Foreign, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.byUID[uid]
	if a == nil || c.ours[uid] {
		return Foreign{}, false
	}
	f := Foreign{UID: uid, Name: a.name, Consumers: a.consumers}
	for _, d := range a.devices {
		if n, _, ok := c.slices.Leaf(d.pool, d.name); ok {
			f.Node = n
			f.Devices = append(f.Devices, d.name)
		}
	}
	return f, len(f.Devices) > 0
}

// Announce reports whether a foreign claim is to be told that it is
// counted: once per claim and process.
func (c *Claims) Announce(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.announced[uid] {
		return false
	}
	c.announced[uid] = true
	return true
}

// ForeignOn names (sorted, at most max) the claims hivesched did not
// allocate that hold devices on the nodes, with the pods they are reserved
// for.
func (c *Claims) ForeignOn(nodes []string, max int) (names []string, more int) {
	in := sets.New(nodes...)
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, a := range c.byUID {
		if c.ours[uid] {
			continue
		}
		on := false
		for _, d := range a.devices {
			if n, _, ok := c.slices.Leaf(d.pool, d.name); ok && in.Has(n) {
				on = true
				break
			}
		}
		if !on {
			continue
		}
		var pods []string
		for _, r := range a.consumers {
			pods = append(pods, r.Name)
		}
		s := "claim " + a.name
		if len(pods) > 0 {
			s += fmt.Sprintf(" (for %s)", strings.Join(pods, ", "))
		}
		names = append(names, s)
	}
	sort.Strings(names)
	if len(names) > max {
		more = len(names) - max
		names = names[:max]
	}
	return names, more
}

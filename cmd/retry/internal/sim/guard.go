package sim

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// BytesPerRequest is about what a request in flight costs a run at most: its
// slot, token and breaker ticket, its pending event, the strategy's state
// for it, and the garbage collector's headroom. (A request of a policy that
// decides without tokens takes about 40 bytes.) A run holds only the
// requests in flight, but
// a policy that retries past the run's end can keep most of them in flight
// at once, so the guard counts every request at this price.
const BytesPerRequest = 320

// BytesPerClient is about what a client costs a run at most: a strategy of
// its own, in the rows with one per client (Adaptive's, with its scopes:
// measured, about 2.9 KB with the garbage collector's headroom), a circuit
// breaker of its own in the breaker's rows, and in the fleet rows (a
// breaker bound to a store, an Adaptive sharing its evidence) the store's
// side of the process and its timer: measured, about 6 KB.
const BytesPerClient = 8192

// fallbackMaxRequests is the guard where the memory available cannot be
// read.
const fallbackMaxRequests = 50_000_000

// LayerBytesPerRequest is about what a user's request in flight costs a
// layered run at most: the calls it makes at every tier (one per attempt of
// the tier above, up to 39 with three tiers of three attempts), each with
// its strategy's token and pending events, and the garbage collector's
// headroom. (Measured: about 1.7 KB.)
const LayerBytesPerRequest = 2048

// MaxRequests returns how many requests (rate × duration) a run may
// simulate on this machine: as many as fit, all in flight at once, in half
// the memory available to the process (the lower of the system's available
// memory and what its cgroup may still use), and the memory that was, in
// bytes. Where that cannot be read it returns 50 million and 0.
func MaxRequests() (n int, memory uint64) { return maxInFlight(BytesPerRequest) }

// LayerBytesPerClient is about what one client of a layered run costs at
// most: an instance at each of the three tiers, each with its own strategy.
// (Measured: 3.5 to 6 KB.)
const LayerBytesPerClient = 8192

// MaxMemory returns how much memory a run may take on this machine: half of
// what is available to the process (the lower of the system's available
// memory and what its cgroup may still use), and all of it, in bytes. Where
// that cannot be read it returns 0, 0.
func MaxMemory() (limit, memory uint64) {
	memory = availableMemory()
	return memory / 2, memory
}

func maxInFlight(bytesEach uint64) (n int, memory uint64) {
	limit, memory := MaxMemory()
	if memory == 0 {
		return fallbackMaxRequests, 0
	}
	return int(min(limit/bytesEach, maxRequests)), memory
}

// availableMemory returns the bytes of memory this process may still use,
// or 0 if it cannot tell.
func availableMemory() uint64 {
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	avail := parseMeminfo(meminfo, "MemAvailable")
	if limit, ok := parseCgroupBytes(readFile("/sys/fs/cgroup/memory.max")); ok {
		used, _ := parseCgroupBytes(readFile("/sys/fs/cgroup/memory.current"))
		if limit > used && (avail == 0 || limit-used < avail) {
			avail = limit - used
		}
	}
	return avail
}

func readFile(path string) []byte {
	data, _ := os.ReadFile(path)
	return data
}

// parseMeminfo returns the value of field in /proc/meminfo's format
// ("MemAvailable:   22264116 kB"), in bytes, or 0 if it is absent or
// malformed.
func parseMeminfo(data []byte, field string) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 || len(f) > 2 || len(f) == 2 && f[1] != "kB" {
			return 0
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0
		}
		if len(f) == 2 {
			if v > (1<<64-1)/1024 {
				return 0
			}
			v *= 1024
		}
		return v
	}
	return 0
}

// parseCgroupBytes parses a cgroup v2 memory file: a number of bytes, or
// "max" for no limit (reported as not ok).
func parseCgroupBytes(data []byte) (uint64, bool) {
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	return v, err == nil
}

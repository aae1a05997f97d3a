package inspect

import "slices"

// listHash is an FNV-1a hash over words and strings, for finding equal
// lists (of frames, of what goroutines wait on) to share.
type listHash uint64

func newListHash() listHash { return 14695981039346656037 }

func (h *listHash) word(v uint64) {
	*h ^= listHash(v)
	*h *= 1099511628211
}

func (h *listHash) str(s string) {
	h.word(uint64(len(s)))
	for i := 0; i < len(s); i++ {
		h.word(uint64(s[i]))
	}
}

// sharedLists keeps, per hash, the first list kept with it, for later
// equal lists to share. Kept lists are never written.
type sharedLists[T comparable] map[listHash][]T

// find returns the kept list equal to list, if its hash has one.
func (s sharedLists[T]) find(h listHash, list []T) ([]T, bool) {
	if same, ok := s[h]; ok && slices.Equal(same, list) {
		return same, true
	}
	return nil, false
}

// add keeps list under h, unless another list holds h already.
func (s sharedLists[T]) add(h listHash, list []T) {
	if _, taken := s[h]; !taken {
		s[h] = list
	}
}

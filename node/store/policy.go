package store

import (
	"bytes"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The owner's policy changes made at run time (through the control API):
// disclosure tiers per persona and peer, and temperature maxima per peer.
// They are kept apart from config.toml, which the daemon never rewrites,
// and take precedence over it.

var bucketPolicy = []byte("policy")

const (
	policyDisclosure  = "disclosure"
	policyTemperature = "temperature"
)

// PolicyOverrides are the run-time policy changes.
type PolicyOverrides struct {
	Disclosure     map[string]map[string]string `json:"disclosure"`      // persona -> peer -> tier
	MaxTemperature map[string]string            `json:"max_temperature"` // peer -> cool|warm|hot
}

func policyKey(parts ...string) []byte { return bytes.Join(toBytes(parts), []byte{0}) }

func toBytes(parts []string) [][]byte {
	out := make([][]byte, len(parts))
	for i, p := range parts {
		out[i] = []byte(p)
	}
	return out
}

func (s *Store) setPolicy(key []byte, value string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketPolicy)
		if err != nil {
			return err
		}
		if value == "" {
			return b.Delete(key)
		}
		return b.Put(key, []byte(value))
	})
}

// SetDisclosure records the tier granted to peer under persona; an empty
// tier removes the override.
func (s *Store) SetDisclosure(persona, peer, tier string) error {
	if persona == "" || peer == "" {
		return errors.New("storing disclosure: persona and peer are required")
	}
	if err := s.setPolicy(policyKey(policyDisclosure, persona, peer), tier); err != nil {
		return fmt.Errorf("storing disclosure for %s under %s: %w", peer, persona, err)
	}
	return nil
}

// SetMaxTemperature records the highest temperature peer may reach; an
// empty value removes the override.
func (s *Store) SetMaxTemperature(peer, temperature string) error {
	if peer == "" {
		return errors.New("storing temperature: peer is required")
	}
	if err := s.setPolicy(policyKey(policyTemperature, peer), temperature); err != nil {
		return fmt.Errorf("storing temperature for %s: %w", peer, err)
	}
	return nil
}

// PolicyOverrides returns every run-time policy change.
func (s *Store) PolicyOverrides() (PolicyOverrides, error) {
	o := PolicyOverrides{Disclosure: map[string]map[string]string{}, MaxTemperature: map[string]string{}}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPolicy)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			parts := bytes.Split(k, []byte{0})
			switch {
			case len(parts) == 3 && string(parts[0]) == policyDisclosure:
				persona := string(parts[1])
				if o.Disclosure[persona] == nil {
					o.Disclosure[persona] = map[string]string{}
				}
				o.Disclosure[persona][string(parts[2])] = string(v)
			case len(parts) == 2 && string(parts[0]) == policyTemperature:
				o.MaxTemperature[string(parts[1])] = string(v)
			default:
				return fmt.Errorf("%w: %s/%q is not a policy key", ErrCorrupt, bucketPolicy, k)
			}
			return nil
		})
	})
	if err != nil {
		return PolicyOverrides{}, fmt.Errorf("reading policy: %w", err)
	}
	return o, nil
}

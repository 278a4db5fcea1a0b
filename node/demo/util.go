package demo

import (
	"encoding/json"

	"github.com/ifaced/ifaced/conditions"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func mustConditions(s string) *conditions.Conditions {
	var c conditions.Conditions
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		panic(err)
	}
	return &c
}

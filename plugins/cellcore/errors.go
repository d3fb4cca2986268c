package cellcore

import "errors"

// SpecError is a refusal of a group's request: what the user asked for is
// invalid or can never be met (an unknown VC or cell type, a pod larger
// than any node, members that disagree). Every other error of the core is
// internal: a state it did not expect, not the user's mistake.
type SpecError struct{ Err error }

func (e *SpecError) Error() string { return e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

func specError(err error) error {
	if err == nil {
		return nil
	}
	return &SpecError{Err: err}
}

// IsSpecError reports whether err refuses the request (see SpecError).
func IsSpecError(err error) bool {
	var se *SpecError
	return errors.As(err, &se)
}

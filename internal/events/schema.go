package events

import _ "embed"

// EventSchema is the JSON Schema (draft 2020-12) of the entry and exit
// lines of `trace --output json` (Line). It is generated from Line and
// its field comments by TestEventSchemaCurrent (go test ./internal/events
// -run TestEventSchemaCurrent -update rewrites event.schema.json) with
// github.com/invopop/jsonschema.
//
//go:embed event.schema.json
var EventSchema []byte

// Line is one entry or exit line of `trace --output json`, as JSON.Append
// writes it (in this field order); the source of EventSchema. Units are
// in the field names.
type Line struct {
	// Type is "entry" (a call) or "exit" (its return).
	Type string `json:"type" jsonschema:"enum=entry,enum=exit"`
	// TsNs is the CLOCK_MONOTONIC time of the event (bpf_ktime_get_ns).
	TsNs uint64 `json:"ts_ns"`
	// CPU is the CPU the event ran on.
	CPU uint32 `json:"cpu"`
	// Tgid is the process id.
	Tgid uint32 `json:"tgid"`
	// Tid is the thread id.
	Tid uint32 `json:"tid"`
	// Comm is the thread's name.
	Comm string `json:"comm"`
	// Func is the traced kernel function.
	Func string `json:"func"`
	// Module is the function's module, when not built in.
	Module string `json:"module,omitempty"`
	// FuncID is the function's id in this trace.
	FuncID uint32 `json:"func_id"`
	// Mode is the attach mode that recorded the event.
	Mode string `json:"mode"`
	// Depth is the call depth of the thread (0: outermost traced call).
	Depth uint16 `json:"depth"`
	// EntryOnly says the function is traced at entry only, and why
	// ("noreturn"): its calls have no exit line by design.
	EntryOnly string `json:"entry_only,omitempty"`
	// Args holds the arguments (entries, and exits that carry their
	// entry's) by parameter name in prototype order (an unnamed parameter
	// is argN; at most the first 6), typed from the function's BTF
	// prototype by the rule the text output follows, which "ret",
	// "values" and call trees share: a signed integer is a number
	// sign-extended from its C type's size (int dfd = AT_FDCWD is -100,
	// whether its 64-bit register holds 0xffffff9c or
	// 0xffffffffffffff9c); an unsigned integer a number cut to its size; a
	// bool true or false; an enum the name of its constant as a string (its
	// number when no constant matches); a pointer a hex string
	// ("0xffff80008047bc90"), NULL null; a `char *` read with --strings the
	// string (cut ones named in "truncated"; a failed read null, its errno
	// in "string_errors"); anything else (a float, a small struct in a
	// register) the register as a hex string. A struct read with --arg is
	// an object by member name, its members by the same rule.
	Args map[string]any `json:"args,omitempty"`
	// Regs replaces Args where no BTF prototype describes the argument
	// registers (no BTF for the function, a struct passed by value, a
	// compiler copy): the raw registers as unsigned 64-bit numbers.
	Regs []uint64 `json:"regs,omitempty"`
	// Truncated lists the --strings parameters whose string was cut at
	// 127 bytes.
	Truncated []string `json:"truncated,omitempty"`
	// StringErrors gives the errno ("-EFAULT") of each --strings read that
	// failed, by parameter name.
	StringErrors map[string]string `json:"string_errors,omitempty"`
	// Values holds the --arg values by expression, as written: typed by
	// the rule of "args" (a string for a `char *`, an object for a whole
	// struct), null for a NULL string or a faulted read.
	Values map[string]any `json:"values,omitempty"`
	// ValueErrors gives the errno ("-EFAULT") of each --arg read that
	// faulted, by expression.
	ValueErrors map[string]string `json:"value_errors,omitempty"`
	// Stack is the kernel stack (--stack), innermost first:
	// "symbol+0xOFF [module]".
	Stack []string `json:"stack,omitempty"`
	// StackError is the errno ("-EFAULT") of a --stack capture that
	// failed.
	StackError string `json:"stack_error,omitempty"`
	// Ret is the return value (exits), typed by the rule of "args" from
	// the prototype's return type: -2 for an int function's -ENOENT, a
	// pointer as a hex string (an error pointer too), null for a void
	// function; without a prototype, the register as a signed 64-bit
	// number.
	Ret any `json:"ret,omitempty" jsonschema:"oneof_type=integer;string;boolean;null"`
	// RetStr is the return value as the text output prints it: errno
	// names ("-ENOENT", "ERR_PTR(-EINVAL)"), "NULL", "void".
	RetStr string `json:"ret_str,omitempty"`
	// DurationNs is the time since the matching entry (exits with an
	// entry).
	DurationNs uint64 `json:"duration_ns,omitempty"`
	// NoEntry is true on an exit whose entry was not recorded.
	NoEntry bool `json:"no_entry,omitempty"`
}

//! The checked program every engine runs.
//!
//! Pipeline: text → [`crate::ast`] (spans, macros, compound assignments) → checker
//! ([`crate::check`]: names resolved, macros expanded, loops bounded, MBuf and register indexes
//! proven or masked, externs resolved) → this IR → the interpreter ([`crate::interp`]) or the
//! x86-64 code generator (`native`).
//!
//! Invariants the checker establishes (engines rely on them, nothing else builds IR):
//! - every `Mem`/`Reg` index is either a constant in range or is masked at run time with
//!   `mbuf_words - 1` / `NREGS - 1` (both powers of two);
//! - every `Extern` has an index into the program's extern table whose input and output ranges
//!   lie inside the MBuf;
//! - `Break` appears only inside a `For`; every `For` has a proven iteration bound;
//! - the tree is no deeper than the parser's limit plus a small constant (macro expansion).

use crate::ast::{BinOp, UnOp, Width};

/// A value-producing expression. All values are `u64`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// A constant.
    Const(u64),
    /// `R[i]`; the index is masked with `NREGS - 1` unless constant.
    Reg(Box<Index>),
    /// `MEM[i]`; the index is masked with `mbuf_words - 1` unless constant.
    Mem(Box<Index>),
    /// A big-endian packet load; a load not wholly inside the captured bytes yields 0.
    Pkt {
        /// Width.
        width: Width,
        /// Sign-extend to 64 bits.
        signed: bool,
        /// Byte offset.
        off: Box<Expr>,
    },
    /// A sub-field of a value: see [`crate::interp::subfield`].
    Sub {
        /// The container.
        base: Box<Expr>,
        /// The field number.
        index: Box<Expr>,
        /// Container width in bits, field width in bits, signedness, packed by [`sub_params`].
        params: u64,
    },
    /// The length on the wire.
    WireLen,
    /// The captured length.
    CapLen,
    /// A unary operation.
    Un(UnOp, Box<Expr>),
    /// A binary operation.
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// `HASH(start, len, size)`: see [`crate::interp::hash`].
    Hash(Box<[Expr; 3]>),
    /// A call of extern number `idx`.
    Extern {
        /// Index into the program's extern table.
        idx: u32,
    },
}

/// An MBuf or register index: a constant (in range) or an expression masked at run time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Index {
    /// Proven in range.
    Const(u64),
    /// Masked with the given mask at run time.
    Masked(Expr, u64),
}

/// Where an assignment stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// A register.
    Reg(Index),
    /// An MBuf word.
    Mem(Index),
}

/// A statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    /// `place = value` or `place = place op value`: the index is evaluated first, then (for an
    /// update) the old value is read, then `value` is evaluated, then the store happens.
    Assign {
        /// The destination.
        place: Place,
        /// `Some` for `op=`, `++`, `--`.
        op: Option<BinOp>,
        /// The right-hand side.
        value: Expr,
    },
    /// A conditional.
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    /// A bounded loop: `init; while test { body; update }`.
    For {
        /// Runs once.
        init: Box<Stmt>,
        /// Checked before each iteration.
        test: Expr,
        /// Runs after each iteration.
        update: Box<Stmt>,
        /// The body.
        body: Vec<Stmt>,
        /// Proven maximum number of iterations.
        bound: u64,
    },
    /// Leave the innermost loop.
    Break,
    /// End the filter with a value.
    Return(Expr),
    /// Evaluate for effect.
    Eval(Expr),
}

/// Packs sub-field parameters into one word (so that native code passes them in a register).
pub fn sub_params(container_bits: u8, field_bits: u8, signed: bool) -> u64 {
    u64::from(container_bits) | u64::from(field_bits) << 8 | u64::from(signed) << 16
}

/// Unpacks [`sub_params`].
pub fn unpack_sub(p: u64) -> (u32, u32, bool) {
    (
        (p & 0xff) as u32,
        ((p >> 8) & 0xff) as u32,
        (p >> 16) & 1 == 1,
    )
}

/// Loads of `width` bytes with sign extension.
pub fn width_bits(w: Width) -> u32 {
    u32::from(w.bytes()) * 8
}

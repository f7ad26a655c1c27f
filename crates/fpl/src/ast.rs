//! The syntax tree: FPL text as written, with spans. Built by [`crate::parse`], consumed by the
//! checker, which lowers it to [`crate::ir`].
//!
//! Every expression records its depth; the parser refuses trees deeper than
//! [`crate::parse::MAX_DEPTH`], so every recursive walk (including `Drop`) is bounded.

use crate::error::Span;

/// Width of a packet load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// `B`: 8 bits.
    B,
    /// `W`: 16 bits.
    W,
    /// `DW`: 32 bits.
    DW,
    /// `QW`: 64 bits.
    QW,
}

impl Width {
    /// Bytes read.
    pub fn bytes(self) -> u8 {
        match self {
            Width::B => 1,
            Width::W => 2,
            Width::DW => 4,
            Width::QW => 8,
        }
    }
}

/// Binary operators (C meaning, on unsigned 64-bit values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+` (wrapping).
    Add,
    /// `-` (wrapping).
    Sub,
    /// `*` (wrapping).
    Mul,
    /// `/` (x / 0 = 0).
    Div,
    /// `%` (x % 0 = 0).
    Rem,
    /// `&`.
    And,
    /// `|`.
    Or,
    /// `^`.
    Xor,
    /// `<<` (0 when the amount is 64 or more).
    Shl,
    /// `>>` (0 when the amount is 64 or more).
    Shr,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `&&` (short-circuit).
    LAnd,
    /// `||` (short-circuit).
    LOr,
}

impl BinOp {
    /// The operator's spelling.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::LAnd => "&&",
            BinOp::LOr => "||",
        }
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `-` (two's complement).
    Neg,
    /// `!` (1 if zero, else 0).
    Not,
    /// `~`.
    BitNot,
}

/// A sub-field selector: `.U<bits>[index]` or `.S<bits>[index]`.
#[derive(Debug)]
pub struct Sub {
    /// Bits per field: 1, 4, 8, 16 or 32 (smaller than the container).
    pub bits: u8,
    /// Sign-extend the field.
    pub signed: bool,
    /// Which field, 0 being the most significant (first on the wire).
    pub index: Box<Expr>,
}

/// An expression.
#[derive(Debug)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it is.
    pub span: Span,
    /// Height of the tree (1 for a leaf).
    pub depth: u32,
}

/// The kinds of expression.
#[derive(Debug)]
pub enum ExprKind {
    /// A literal.
    Num(u64),
    /// A named constant (`TRUE`, `PROTO_TCP`…).
    Name(String),
    /// `R[e]`.
    Reg(Box<Expr>),
    /// `MEM[e]` (or `M[e]`).
    Mem(Box<Expr>),
    /// `PKT.B[e]`, `PKT.SW[e]`, … with an optional sub-field.
    Pkt {
        /// Load width.
        width: Width,
        /// Sign-extend the loaded value.
        signed: bool,
        /// Byte offset.
        off: Box<Expr>,
        /// `.U1[m]` and friends.
        sub: Option<Sub>,
    },
    /// `PKT.IP_PROTO` and the other header-field macros.
    Macro(String),
    /// `op e`.
    Unary(UnOp, Box<Expr>),
    /// `a op b`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `HASH(start, len, size)`.
    Hash(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `EXTERN(name, in, out)`.
    Extern {
        /// The function's name.
        name: String,
        /// The name's span.
        name_span: Span,
        /// MBuf word offset of the input.
        input: Box<Expr>,
        /// MBuf word offset of the output.
        output: Box<Expr>,
    },
}

/// A statement.
#[derive(Debug)]
pub enum Stmt {
    /// `place = e`, `place op= e`.
    Assign {
        /// `R[..]` or `MEM[..]`.
        place: Expr,
        /// `None` for `=`.
        op: Option<BinOp>,
        /// The right-hand side.
        value: Expr,
        /// The whole statement.
        span: Span,
    },
    /// `place++`, `place--`, `++place`, `--place`.
    Step {
        /// `R[..]` or `MEM[..]`.
        place: Expr,
        /// `--` rather than `++`.
        down: bool,
        /// The whole statement.
        span: Span,
    },
    /// `IF (c) THEN … [ELSE …] FI`.
    If {
        /// The condition.
        cond: Expr,
        /// Taken when the condition is non-zero.
        then: Vec<Stmt>,
        /// Taken otherwise.
        els: Vec<Stmt>,
        /// The `IF` keyword.
        span: Span,
    },
    /// `FOR (init; test; update) … ROF`.
    For {
        /// Runs once.
        init: Box<Stmt>,
        /// Checked before each iteration.
        test: Expr,
        /// Runs after each iteration.
        update: Box<Stmt>,
        /// The loop body.
        body: Vec<Stmt>,
        /// The `FOR` keyword.
        span: Span,
    },
    /// `BREAK`.
    Break(Span),
    /// `RETURN (e)`.
    Return(Expr, Span),
    /// An expression evaluated for its effect (`EXTERN(…)`).
    Expr(Expr),
}

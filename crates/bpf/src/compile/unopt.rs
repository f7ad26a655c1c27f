//! Unoptimised code generation: one block per test, in the order of the predicate, as
//! libpcap's code generator lays them out before optimisation. The result reads exactly what
//! the predicate reads, in the same order, so it rejects exactly the packets libpcap's
//! unoptimised program rejects for lack of bytes. Protochain loops and Geneve offsets are
//! emitted here too (libpcap never optimises filters that contain them).

use netsift_lang::pred::{Base, Cmp, Node, NodeId, Pred, RadioHeader, Special, Test};

use super::CompileError;
use super::cfg::{BlockId, Cfg, Term};
use super::emit::{ValCompiler, load_field, var_ipv4_hlen};
use crate::insn::{Insn, code::*};

pub(crate) struct Unopt<'a> {
    pred: &'a Pred,
    pub cfg: Cfg,
    vals: ValCompiler,
    accept: BlockId,
    reject: BlockId,
}

impl<'a> Unopt<'a> {
    pub fn new(pred: &'a Pred, snaplen: u32, floor: u8) -> Unopt<'a> {
        let mut cfg = Cfg::default();
        let accept = cfg.add(&[], Term::Ret(snaplen));
        let reject = cfg.add(&[], Term::Ret(0));
        Unopt {
            pred,
            cfg,
            vals: ValCompiler::new(floor),
            accept,
            reject,
        }
    }

    pub fn run(mut self) -> Result<Cfg, CompileError> {
        let root = self.pred.root();
        let (t, f) = (self.accept, self.reject);
        let entry = self.node_code(root, t, f)?;
        self.cfg.root = Some(entry);
        Ok(self.cfg)
    }

    fn block(&mut self, stmts: Vec<Insn>, term: Term) -> BlockId {
        self.cfg.add(&stmts, term)
    }

    fn jump(&mut self, stmts: Vec<Insn>, code: u16, k: u32, jt: BlockId, jf: BlockId) -> BlockId {
        self.block(stmts, Term::Jump { code, k, jt, jf })
    }

    /// The entry block of `node`, continuing to `t` when it holds and to `f` otherwise.
    fn node_code(&mut self, node: NodeId, t: BlockId, f: BlockId) -> Result<BlockId, CompileError> {
        match self.pred.node(node).clone() {
            Node::Const(b) => {
                if self.pred.is_exact() {
                    // libpcap's gen_true/gen_false blocks: `ld #0|#1; jeq #0` (they set A).
                    Ok(self.jump(
                        vec![Insn::stmt(LD | IMM, u32::from(!b))],
                        JMP | JEQ | K,
                        0,
                        t,
                        f,
                    ))
                } else {
                    Ok(if b { t } else { f })
                }
            }
            Node::Not(x) => self.node_code(x, f, t),
            Node::And(ops) => {
                let mut next = t;
                for &o in ops.iter().rev() {
                    next = self.node_code(o, next, f)?;
                }
                Ok(next)
            }
            Node::Or(ops) => {
                let mut next = f;
                for &o in ops.iter().rev() {
                    next = self.node_code(o, t, next)?;
                }
                Ok(next)
            }
            Node::Test(test) => Ok(self.test(&test, t, f)),
            Node::Relation(a, op, b) => {
                let mut stmts = Vec::new();
                let exact = self.pred.is_exact();
                let (code, k) = self.vals.relation(&a, op, &b, exact, &mut stmts)?;
                Ok(self.jump(stmts, code, k, t, f))
            }
            Node::Special(s) => self.special(&s, t, f),
        }
    }

    fn test(&mut self, test: &Test, t: BlockId, f: BlockId) -> BlockId {
        let mut stmts = load_field(&test.field);
        if test.mask != u32::MAX {
            stmts.push(Insn::stmt(ALU | AND | K, test.mask));
        }
        match &test.cmp {
            Cmp::Eq(v) => self.jump(stmts, JMP | JEQ | K, *v, t, f),
            Cmp::Gt(v) => self.jump(stmts, JMP | JGT | K, *v, t, f),
            Cmp::Ge(v) => self.jump(stmts, JMP | JGE | K, *v, t, f),
            Cmp::Bits(v) => self.jump(stmts, JMP | JSET | K, *v, t, f),
            Cmp::OneOf(vs) => {
                // A chain of jeqs on the value loaded once.
                let mut next = f;
                for (i, &v) in vs.iter().enumerate().rev() {
                    let s = if i == 0 {
                        std::mem::take(&mut stmts)
                    } else {
                        vec![]
                    };
                    next = self.jump(s, JMP | JEQ | K, v, t, next);
                }
                next
            }
            Cmp::Range(lo, hi) => {
                let upper = self.jump(vec![], JMP | JGT | K, *hi, f, t);
                self.jump(stmts, JMP | JGE | K, *lo, upper, f)
            }
        }
    }

    fn special(&mut self, s: &Special, t: BlockId, f: BlockId) -> Result<BlockId, CompileError> {
        match *s {
            Special::AccOp { or, val } => {
                let op = if or { ALU | OR | K } else { ALU | AND | K };
                // True when the result is not zero: `jeq #0` with the exits swapped.
                Ok(self.jump(vec![Insn::stmt(op, val)], JMP | JEQ | K, 0, f, t))
            }
            Special::RegsDiffer(a, b) => Ok(self.jump(
                vec![
                    Insn::stmt(LD | MEM, u32::from(a)),
                    Insn::stmt(LDX | W | MEM, u32::from(b)),
                ],
                JMP | JEQ | X,
                0,
                f,
                t,
            )),
            Special::GeneveHeaderLen { nl, ipv6 } => {
                let stmts = match (nl, ipv6) {
                    (Base::Abs(k) | Base::Ipv4Payload(k), false) => {
                        vec![Insn::stmt(LDX | B | MSH, k), Insn::stmt(MISC | TXA, 0)]
                    }
                    (Base::Abs(_) | Base::Ipv4Payload(_), true) => {
                        vec![Insn::stmt(LD | IMM, 40), Insn::stmt(MISC | TAX, 0)]
                    }
                    (Base::Var(reg, _) | Base::VarIpv4Payload(reg, _), true) => vec![
                        Insn::stmt(LDX | W | MEM, u32::from(reg)),
                        Insn::stmt(LD | IMM, 40),
                        Insn::stmt(ALU | ADD | X, 0),
                        Insn::stmt(MISC | TAX, 0),
                    ],
                    (Base::Var(reg, _) | Base::VarIpv4Payload(reg, _), false) => {
                        let mut v = var_ipv4_hlen(reg, 0);
                        v.push(Insn::stmt(MISC | TAX, 0));
                        v
                    }
                };
                // Always true (A == X): the block exists for its side effect on A.
                Ok(self.jump(stmts, JMP | JEQ | X, 0, t, f))
            }
            Special::GeneveOffsets {
                nl,
                reg_type,
                reg_link,
                reg_payload,
            } => {
                let k = match nl {
                    Base::Abs(k) | Base::Ipv4Payload(k) | Base::Var(_, k) => k,
                    Base::VarIpv4Payload(..) => 0,
                };
                let (rt, rh, rp) = (
                    u32::from(reg_type),
                    u32::from(reg_link),
                    u32::from(reg_payload),
                );
                let tail = self.jump(
                    vec![Insn::stmt(STX, rp), Insn::stmt(LD | IMM, 0)],
                    JMP | JEQ | K,
                    0,
                    t,
                    f,
                );
                let inner_eth = self.block(
                    vec![
                        Insn::stmt(MISC | TXA, 0),
                        Insn::stmt(ALU | ADD | K, 12),
                        Insn::stmt(ST, rt),
                        Insn::stmt(ALU | ADD | K, 2),
                        Insn::stmt(MISC | TAX, 0),
                    ],
                    Term::Goto(tail),
                );
                Ok(self.jump(
                    vec![
                        Insn::stmt(ALU | ADD | K, k.wrapping_add(8)),
                        Insn::stmt(MISC | TAX, 0),
                        Insn::stmt(ALU | ADD | K, 2),
                        Insn::stmt(ST, rt),
                        Insn::stmt(LD | B | IND, 0),
                        Insn::stmt(ALU | AND | K, 0x3f),
                        Insn::stmt(ALU | MUL | K, 4),
                        Insn::stmt(ALU | ADD | K, 8),
                        Insn::stmt(ALU | ADD | X, 0),
                        Insn::stmt(ST, rh),
                        Insn::stmt(LD | H | IND, 2),
                        Insn::stmt(LDX | W | MEM, rh),
                    ],
                    JMP | JEQ | K,
                    0x6558,
                    inner_eth,
                    tail,
                ))
            }
            Special::ProtoChain { nl, ipv6, proto } => Ok(self.protochain(nl, ipv6, proto, t, f)),
            Special::LinkOffsets {
                prefix,
                hdr,
                payload,
            } => Ok(self.link_offsets(prefix, hdr, payload, t)),
            Special::PflogOffset { payload } => Ok(self.block(
                vec![
                    Insn::stmt(LD | B | ABS, 0),
                    Insn::stmt(ALU | ADD | K, 3),
                    Insn::stmt(ALU | AND | K, 0xffff_fffc),
                    Insn::stmt(ST, u32::from(payload)),
                    Insn::stmt(MISC | TAX, 0),
                ],
                Term::Goto(t),
            )),
        }
    }

    /// libpcap's `insert_compute_vloffsets` for 802.11 (see `Special::LinkOffsets`): the
    /// radio header's length into `M[hdr]` (and X), then the link-layer payload's offset into
    /// `M[payload]`; then on to `t`.
    fn link_offsets(
        &mut self,
        prefix: RadioHeader,
        hdr: Option<u8>,
        payload: Option<u8>,
        t: BlockId,
    ) -> BlockId {
        let pl_head = match payload {
            None => t,
            Some(p) => {
                let p = u32::from(p);
                let datapad = if prefix == RadioHeader::Radiotap {
                    let round = self.block(
                        vec![
                            Insn::stmt(LD | MEM, p),
                            Insn::stmt(ALU | ADD | K, 3),
                            Insn::stmt(ALU | AND | K, !3),
                            Insn::stmt(ST, p),
                        ],
                        Term::Goto(t),
                    );
                    let at16 = self.jump(
                        vec![Insn::stmt(LD | B | ABS, 16)],
                        JMP | JSET | K,
                        0x20,
                        round,
                        t,
                    );
                    let at8 = self.jump(
                        vec![Insn::stmt(LD | B | ABS, 8)],
                        JMP | JSET | K,
                        0x20,
                        round,
                        t,
                    );
                    let tsft = self.jump(vec![], JMP | JSET | K, 0x0100_0000, at16, at8);
                    let ext = self.jump(vec![], JMP | JSET | K, 0x0000_0080, t, tsft);
                    self.jump(
                        vec![Insn::stmt(LD | W | ABS, 4)],
                        JMP | JSET | K,
                        0x0200_0000,
                        ext,
                        t,
                    )
                } else {
                    t
                };
                let add_qos = self.block(
                    vec![
                        Insn::stmt(LD | MEM, p),
                        Insn::stmt(ALU | ADD | K, 2),
                        Insn::stmt(ST, p),
                    ],
                    Term::Goto(datapad),
                );
                let qos = self.jump(vec![], JMP | JSET | K, 0x80, add_qos, datapad);
                let not_data = self.jump(vec![], JMP | JSET | K, 0x04, t, qos);
                let mut stmts = Vec::new();
                if hdr.is_none() {
                    stmts.push(Insn::stmt(LDX | IMM, 0));
                }
                stmts.extend([
                    Insn::stmt(MISC | TXA, 0),
                    Insn::stmt(ALU | ADD | K, 24),
                    Insn::stmt(ST, p),
                    Insn::stmt(LD | B | IND, 0),
                ]);
                self.jump(stmts, JMP | JSET | K, 0x08, not_data, t)
            }
        };
        let Some(h) = hdr else {
            return pl_head;
        };
        let h = u32::from(h);
        let store = [Insn::stmt(ST, h), Insn::stmt(MISC | TAX, 0)];
        match prefix {
            RadioHeader::Radiotap | RadioHeader::Ppi => {
                let mut v = vec![
                    Insn::stmt(LD | B | ABS, 3),
                    Insn::stmt(ALU | LSH | K, 8),
                    Insn::stmt(MISC | TAX, 0),
                    Insn::stmt(LD | B | ABS, 2),
                    Insn::stmt(ALU | OR | X, 0),
                ];
                v.extend(store);
                self.block(v, Term::Goto(pl_head))
            }
            RadioHeader::Avs => {
                let mut v = vec![Insn::stmt(LD | W | ABS, 4)];
                v.extend(store);
                self.block(v, Term::Goto(pl_head))
            }
            RadioHeader::Prism => {
                let common = self.block(store.to_vec(), Term::Goto(pl_head));
                let avs = self.block(vec![Insn::stmt(LD | W | ABS, 4)], Term::Goto(common));
                let prism = self.block(vec![Insn::stmt(LD | IMM, 144)], Term::Goto(common));
                self.jump(
                    vec![
                        Insn::stmt(LD | W | ABS, 0),
                        Insn::stmt(ALU | AND | K, 0xffff_f000),
                    ],
                    JMP | JEQ | K,
                    0x8021_1000,
                    avs,
                    prism,
                )
            }
            RadioHeader::None => self.block(vec![Insn::stmt(LDX | IMM, 0)], Term::Goto(pl_head)),
        }
    }

    /// libpcap's protochain loop (see `Special::ProtoChain`), with scratch register 15.
    fn protochain(&mut self, nl: u32, ipv6: bool, v: u32, t: BlockId, f: BlockId) -> BlockId {
        const R: u32 = 15;
        let end = self.jump(vec![], JMP | JEQ | K, v, t, f);
        // Placeholder for the loop head; patched once the loop body exists.
        let again = self.jump(vec![], JMP | JEQ | K, v, end, end);
        let ah_body = self.block(
            vec![
                Insn::stmt(MISC | TXA, 0),
                Insn::stmt(LD | B | IND, nl),
                Insn::stmt(ST, R),
                Insn::stmt(MISC | TXA, 0),
                Insn::stmt(ALU | ADD | K, 1),
                Insn::stmt(MISC | TAX, 0),
                Insn::stmt(LD | B | IND, nl),
                Insn::stmt(ALU | ADD | K, 2),
                Insn::stmt(ALU | MUL | K, 4),
                Insn::stmt(MISC | TAX, 0),
                Insn::stmt(LD | MEM, R),
            ],
            Term::Goto(again),
        );
        let ah = self.jump(vec![], JMP | JEQ | K, 51, ah_body, end);
        let after_none = if ipv6 {
            let adv = self.block(
                vec![
                    Insn::stmt(LD | B | IND, nl),
                    Insn::stmt(ST, R),
                    Insn::stmt(LD | B | IND, nl.wrapping_add(1)),
                    Insn::stmt(ALU | ADD | K, 1),
                    Insn::stmt(ALU | MUL | K, 8),
                    Insn::stmt(ALU | ADD | X, 0),
                    Insn::stmt(MISC | TAX, 0),
                    Insn::stmt(LD | MEM, R),
                ],
                Term::Goto(again),
            );
            let c44 = self.jump(vec![], JMP | JEQ | K, 44, adv, ah);
            let c43 = self.jump(vec![], JMP | JEQ | K, 43, adv, c44);
            let c60 = self.jump(vec![], JMP | JEQ | K, 60, adv, c43);
            self.jump(vec![], JMP | JEQ | K, 0, adv, c60)
        } else {
            ah
        };
        let none = self.jump(vec![], JMP | JEQ | K, 59, end, after_none);
        self.cfg.set_term(
            again,
            Term::Jump {
                code: JMP | JEQ | K,
                k: v,
                jt: end,
                jf: none,
            },
        );
        let entry_stmts = if ipv6 {
            vec![
                Insn::stmt(LD | B | ABS, nl.wrapping_add(6)),
                Insn::stmt(LDX | W | IMM, 40),
            ]
        } else {
            vec![
                Insn::stmt(LD | B | ABS, nl.wrapping_add(9)),
                Insn::stmt(LDX | B | MSH, nl),
            ]
        };
        self.block(entry_stmts, Term::Goto(again))
    }
}

//! Differential property test: random well-formed FPL programs × random and real packets; the
//! native code must give exactly the interpreter's result, registers and MBuf, packet after
//! packet (state persists across packets).

use netsift_capture::generate::{FrameBuilder, TCP_ACK, XorShift64};
use netsift_fpl::{NREGS, Program, Registry};

struct Gen {
    rng: XorShift64,
    mbuf: u64,
}

const BINOPS: [&str; 18] = [
    "+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "==", "!=", "<", "<=", ">", ">=", "&&",
    "||",
];
const MACROS: [&str; 12] = [
    "IP_PROTO",
    "IP_SRC",
    "IP_DEST",
    "TCP_SPORT",
    "TCP_DPORT",
    "UDP_DPORT",
    "IP_HLEN",
    "TCP_PAYLOAD",
    "LEN",
    "CAPLEN",
    "IP6_SRC_LO",
    "TCP6_DPORT",
];

impl Gen {
    fn n(&mut self, k: u64) -> u64 {
        self.rng.below(k)
    }

    fn num(&mut self) -> String {
        match self.n(6) {
            0 => self.rng.next_u64().to_string(),
            1 => format!("0x{:x}", self.rng.next_u64() >> self.n(64)),
            2 => ["0", "1", "63", "64", "65", "0xffffffffffffffff"][self.n(6) as usize].to_string(),
            _ => self.n(80).to_string(),
        }
    }

    fn expr(&mut self, d: u32) -> String {
        if d == 0 || self.n(4) == 0 {
            return match self.n(8) {
                0 | 1 => self.num(),
                2 => format!("R[{}]", self.n(NREGS as u64)),
                3 => format!("MEM[{}]", self.n(self.mbuf)),
                4 => format!("PKT.{}", MACROS[self.n(12) as usize]),
                5 => format!("PKT.B[{}]", self.n(70)),
                6 => format!("PKT.W[{}]", self.n(70)),
                _ => ["TRUE", "FALSE", "PROTO_TCP"][self.n(3) as usize].to_string(),
            };
        }
        let d = d - 1;
        match self.n(14) {
            0..=4 => {
                let op = BINOPS[self.n(18) as usize];
                format!("({} {op} {})", self.expr(d), self.expr(d))
            }
            5 => format!("{}({})", ["-", "!", "~"][self.n(3) as usize], self.expr(d)),
            6 => {
                let w = ["B", "W", "DW", "QW", "SB", "SW", "SDW"][self.n(7) as usize];
                format!("PKT.{w}[{}]", self.expr(d))
            }
            7 => {
                let (w, s, fields) = [
                    ("B", "U1", 8),
                    ("B", "U4", 2),
                    ("W", "U8", 2),
                    ("DW", "S8", 4),
                    ("QW", "U16", 4),
                    ("DW", "U2", 16),
                ][self.n(6) as usize];
                // A constant index must be in range; a computed one may be anything.
                let idx = if self.n(2) == 0 {
                    self.n(fields).to_string()
                } else {
                    format!("R[{}] + {}", self.n(16), self.expr(d))
                };
                format!("PKT.{w}[{}].{s}[{idx}]", self.n(60))
            }
            // R[..] is never constant-folded, so these indexes are masked at run time.
            8 => format!("MEM[R[{}] + {}]", self.n(16), self.expr(d)),
            9 => format!("R[R[{}] ^ {}]", self.n(16), self.expr(d)),
            10 => format!(
                "HASH({}, {}, {})",
                self.expr(d),
                self.n(20),
                [0, 1, 7, 256][self.n(4) as usize]
            ),
            11 => format!(
                "EXTERN(Mix, {}, {})",
                self.n(self.mbuf - 1),
                self.n(self.mbuf - 1)
            ),
            12 => format!(
                "EXTERN({}, 0, 0)",
                [
                    "GetDynTCPDPortFromRTSP",
                    "GetRTSPPorts",
                    "GetFTPDataPort",
                    "AhoCorasick"
                ][self.n(4) as usize]
            ),
            _ => self.expr(d),
        }
    }

    fn place(&mut self, loops: bool) -> String {
        match self.n(5) {
            0 if !loops => format!("R[R[{}] - {}]", self.n(16), self.expr(1)),
            0 | 1 => format!("R[{}]", self.n(8)),
            2 => format!("MEM[R[{}] * {}]", self.n(16), self.expr(2)),
            _ => format!("MEM[{}]", self.n(self.mbuf)),
        }
    }

    fn stmts(&mut self, d: u32, loop_depth: u32, out: &mut String) {
        for _ in 0..1 + self.n(4) {
            self.stmt(d, loop_depth, out);
        }
    }

    fn stmt(&mut self, d: u32, loop_depth: u32, out: &mut String) {
        let loops = loop_depth > 0;
        match self.n(if d == 0 { 4 } else { 9 }) {
            0 | 1 => {
                let op = [
                    "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=",
                ][self.n(11) as usize];
                let p = self.place(loops);
                let e = self.expr(3);
                out.push_str(&format!("{p} {op} {e};\n"));
            }
            2 => {
                let p = self.place(loops);
                out.push_str(&format!("{p}{};\n", ["++", "--"][self.n(2) as usize]));
            }
            3 => match self.n(6) {
                0 => out.push_str(&format!("RETURN ({});\n", self.expr(2))),
                1 if loops => out.push_str("BREAK;\n"),
                _ => out.push_str(&format!("EXTERN(Mix, {}, 1);\n", self.n(4))),
            },
            4..=6 => {
                out.push_str(&format!("IF ({}) THEN\n", self.expr(3)));
                self.stmts(d - 1, loop_depth, out);
                if self.n(2) == 0 {
                    out.push_str("ELSE\n");
                    self.stmts(d - 1, loop_depth, out);
                }
                out.push_str("FI\n");
            }
            _ if loop_depth < 2 => {
                let v = 8 + loop_depth;
                let (init, test, upd) = if self.n(2) == 0 {
                    (
                        self.n(3),
                        format!("R[{v}] < {}", self.n(6)),
                        format!("R[{v}] += {}", 1 + self.n(2)),
                    )
                } else {
                    (
                        5 + self.n(3),
                        format!("R[{v}] > {}", self.n(3)),
                        format!("R[{v}]--"),
                    )
                };
                let test = if self.n(2) == 0 {
                    format!("{test} && {}", self.expr(2))
                } else {
                    test
                };
                out.push_str(&format!("FOR (R[{v}] = {init}; {test}; {upd})\n"));
                self.stmts(d - 1, loop_depth + 1, out);
                out.push_str("ROF\n");
            }
            _ => out.push_str(&format!("R[{}] = {};\n", self.n(8), self.expr(2))),
        }
    }
}

fn registry() -> Registry {
    let mut r = Registry::standard();
    r.register("Mix", 2, 2, |c| {
        let s = c.input()[0]
            .wrapping_add(c.input()[1])
            .wrapping_add(c.payload().len() as u64);
        let n = c.packet().len() as u64;
        let o = c.output();
        o[0] = s;
        o[1] ^= n;
        s
    });
    r
}

fn packets(rng: &mut XorShift64) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for i in 0..24u64 {
        let mut p = match i % 4 {
            0 => {
                let mut b = vec![0u8; rng.below(90) as usize];
                rng.fill(&mut b);
                b
            }
            1 => FrameBuilder::new()
                .ipv4([10, 0, 0, rng.below(4) as u8], [10, 0, 1, 2])
                .tcp(1000 + rng.below(3) as u16, 554, TCP_ACK)
                .payload(b"RTSP/1.0 200 OK\r\nTransport: RTP/AVP/TCP;client_port=5000-5001\r\n\r\n")
                .build(),
            2 => FrameBuilder::new()
                .ipv4([192, 168, 0, 1], [192, 168, 0, 2])
                .udp(5060, 5060)
                .payload(b"227 Entering Passive Mode (1,2,3,4,5,6)\r\n")
                .build(),
            _ => FrameBuilder::new()
                .ipv6([1; 16], [2; 16])
                .tcp(80, 40000, TCP_ACK)
                .payload(b"HTTP/1.1 200 OK\r\n")
                .build(),
        };
        if rng.below(3) == 0 {
            let cut = rng.below(p.len() as u64 + 1) as usize;
            p.truncate(cut);
        }
        v.push(p);
    }
    v
}

#[test]
fn native_matches_the_interpreter_on_random_programs() {
    if !netsift_jit::available() {
        return;
    }
    let reg = registry();
    let (mut compiled, mut rejected) = (0u64, 0u64);
    // More with FPL_DIFF_SEEDS=n.
    let seeds: u64 = std::env::var("FPL_DIFF_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let mut nonzero = 0u64;
    for seed in 1..=seeds {
        let mut g = Gen {
            rng: XorShift64::new(seed),
            mbuf: [16, 64][(seed % 2) as usize],
        };
        let mut src = String::new();
        g.stmts(3, 0, &mut src);
        let prog = match Program::compile(&src, &reg, g.mbuf as usize) {
            Ok(p) => p,
            Err(e) => {
                rejected += 1;
                // Only cost can reject a generated program (everything else is well-formed).
                assert!(
                    matches!(e.kind(), netsift_fpl::ErrorKind::TooCostly),
                    "seed {seed}: {}\n{src}",
                    e.render(&src)
                );
                continue;
            }
        };
        compiled += 1;
        let native = prog.native().expect("native code");
        let mut rng = XorShift64::new(seed ^ 0x5eed);
        let mut mem_i = vec![0u64; g.mbuf as usize];
        rng.fill_words(&mut mem_i);
        let mut mem_n = mem_i.clone();
        let mut regs_i = [0u64; NREGS];
        for r in regs_i.iter_mut() {
            *r = rng.below(8);
        }
        let mut regs_n = regs_i;
        for (k, p) in packets(&mut rng).iter().enumerate() {
            let wire = p.len() as u32 + (k as u32 % 3);
            let a = prog.run_interp(p, wire, &mut mem_i, &mut regs_i);
            let b = native.run(p, wire, &mut mem_n, &mut regs_n);
            assert_eq!(a, b, "seed {seed} packet {k}: result\n{src}");
            nonzero += u64::from(a != 0);
            assert_eq!(regs_i, regs_n, "seed {seed} packet {k}: registers\n{src}");
            assert_eq!(mem_i, mem_n, "seed {seed} packet {k}: MBuf\n{src}");
        }
    }
    assert!(
        compiled * 10 > seeds * 8,
        "compiled {compiled}, rejected {rejected}"
    );
    assert!(
        nonzero > compiled,
        "results are almost all 0: the test would prove little"
    );
}

trait FillWords {
    fn fill_words(&mut self, w: &mut [u64]);
}

impl FillWords for XorShift64 {
    fn fill_words(&mut self, w: &mut [u64]) {
        for x in w {
            *x = if self.below(2) == 0 {
                self.below(100)
            } else {
                self.next_u64()
            };
        }
    }
}

//! The checker's rejections, word for word, and its resource report.

use netsift_fpl::{ErrorKind, Program, Registry};

fn reject(src: &str, mbuf: usize) -> netsift_fpl::Error {
    match Program::compile(src, &Registry::standard(), mbuf) {
        Ok(_) => panic!("accepted: {src}"),
        Err(e) => e,
    }
}

#[test]
fn unbounded_loops() {
    let e = reject("FOR (R[1] = 0; R[1] < R[0]; R[1]++) R[2]++; ROF", 16);
    assert_eq!(e.kind(), ErrorKind::Unbounded);
    assert!(
        e.message()
            .starts_with("the FOR loop at line 1 has no compile-time bound"),
        "{e}"
    );

    let e = reject(
        "R[0] = 1;\nFOR (R[1] = 0; R[1] < 10; R[1]++)\n  R[1] = 0;\nROF",
        16,
    );
    assert_eq!(
        e.to_string(),
        "line 2, column 1: the FOR loop at line 2 has no compile-time bound: its body assigns the loop variable R[1] (or a register through a computed index)"
    );
    let e = reject("FOR (R[1] = PKT.B[0]; R[1] < 10; R[1]++) ROF", 16);
    assert_eq!(
        e.message(),
        "the FOR loop at line 1 has no compile-time bound: its init must be `R[n] = <constant>`"
    );
    let e = reject("FOR (R[1] = 0; R[1] < 10; R[1] += 0) ROF", 16);
    assert!(e.message().contains("with a non-zero constant"), "{e}");
    let e = reject("FOR (R[1] = 0; R[1] < 10; R[2]++) ROF", 16);
    assert!(e.message().contains("its update must be R[1]++"), "{e}");
    // Moving away from the bound, or a bound the variable can only reach by wrapping.
    assert_eq!(
        reject("FOR (R[1] = 5; R[1] < 10; R[1]--) ROF", 16).kind(),
        ErrorKind::Unbounded
    );
    assert_eq!(
        reject("FOR (R[1] = 5; R[1] >= 0; R[1]--) ROF", 16).kind(),
        ErrorKind::Unbounded
    );
    assert_eq!(
        reject("FOR (R[1] = 0; R[1] <= 0xffffffffffffffff; R[1]++) ROF", 16).kind(),
        ErrorKind::Unbounded
    );
    // A test that is not a comparison of the variable bounds nothing (the fuzzer found
    // `R[1] || 8` accepted as a loop that never runs; it ran until its BREAK, or forever).
    for test in ["R[1] || 8", "R[1] | 8", "R[1] + 1", "R[1] && R[1] ^ 3"] {
        let src = format!("FOR (R[1] = 0; {test}; R[1]++) MEM[R[1]] = 1; ROF");
        assert_eq!(reject(&src, 16).kind(), ErrorKind::Unbounded, "{src}");
    }
    // Computed register index in the body.
    let e = reject("FOR (R[1] = 0; R[1] < 4; R[1]++) R[PKT.B[0]] = 1; ROF", 16);
    assert!(e.message().contains("computed index"), "{e}");
}

#[test]
fn bounded_loops_and_their_report() {
    let p = Program::compile(
        "FOR (R[1] = 0; R[1] < 10; R[1] += 3)\n  FOR (R[2] = 8; 0 < R[2]; R[2]--) MEM[R[2]]++; ROF\nROF\nFOR (R[3] = 0; R[3] != 8; R[3] += 2) IF (R[3] == 4) THEN BREAK FI ROF",
        &Registry::standard(),
        16,
    )
    .unwrap();
    assert_eq!(p.report().loops, vec![(2, 8), (1, 4), (4, 4)]);
    assert!(p.report().max_ops > 4 * 8 * 3);
    let text = p.report().to_string();
    assert!(
        text.contains("loop at line 1: at most 4 iterations"),
        "{text}"
    );
    let e = reject(
        "FOR (R[1] = 0; R[1] < 100000; R[1]++) FOR (R[2] = 0; R[2] < 100000; R[2]++) ROF ROF",
        16,
    );
    assert_eq!(e.kind(), ErrorKind::TooCostly);
}

#[test]
fn mbuf_indexes() {
    let e = reject("MEM[16] = 1", 16);
    assert_eq!(
        e.to_string(),
        "line 1, column 1: MEM[16] is out of range: there are 16 64-bit words (indexes 0 to 15)"
    );
    let e = reject("R[0] = MEM[4 * 4 + 1]", 16);
    assert_eq!(e.kind(), ErrorKind::OutOfRange);
    let e = reject("R[16] = 1", 16);
    assert_eq!(
        e.message(),
        "R[16] is out of range: there are 16 registers (indexes 0 to 15)"
    );
    // Computed indexes are masked.
    Program::compile("MEM[PKT.B[0] * 1000]++", &Registry::standard(), 16).unwrap();
    let e = reject("R[0] = 1", 12);
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert_eq!(
        e.message(),
        "MBuf size 12 is not a power of two between 1 and 16777216 words"
    );
}

#[test]
fn externs() {
    let src = "R[0] = 1;\nR[1] = EXTERN(Nope, 0, 0);";
    let e = reject(src, 16);
    assert_eq!(e.kind(), ErrorKind::UnknownExtern);
    assert!(
        e.message().starts_with(
            "unknown external function `Nope` (registered: AhoCorasick, BoyerMoore, FlowCount,"
        ),
        "{e}"
    );
    assert_eq!(
        e.render(src),
        e.message().to_string() + " (line 2)\n  R[1] = EXTERN(Nope, 0, 0);\n                ^^^^"
    );
    assert_eq!(e.to_string(), format!("line 2, column 15: {}", e.message()));
    // FlowCount writes 256 words: a 128-word MBuf cannot hold them.
    let e = reject("EXTERN(FlowCount, 0, 0)", 128);
    assert_eq!(e.kind(), ErrorKind::ExternParams);
    assert_eq!(
        e.message(),
        "EXTERN(FlowCount, …): the output needs 256 words from MBuf offset 0, but the MBuf has 128 words"
    );
    let e = reject("EXTERN(BoyerMoore, 60, 0)", 64);
    assert_eq!(
        e.message(),
        "EXTERN(BoyerMoore, …): the input needs 8 words from MBuf offset 60, but the MBuf has 64 words"
    );
    let e = reject("EXTERN(BoyerMoore, R[0], 0)", 64);
    assert_eq!(
        e.message(),
        "the input offset of EXTERN(BoyerMoore, …) must be a constant"
    );
    Program::compile("EXTERN(BoyerMoore, 56, 0)", &Registry::standard(), 64).unwrap();
    Program::compile("EXTERN(\"TopK\", 0, 256)", &Registry::standard(), 512).unwrap();
}

#[test]
fn misc_errors_render_with_a_caret() {
    let src = "IF (PKT.IP_PROTO == PROTO_TCP) THEN\n    R[0] = PKT.IP_PROTOCOL;\nFI";
    let e = reject(src, 16);
    assert_eq!(
        e.render(src),
        "unknown packet field `PKT.IP_PROTOCOL` (line 2)\n      R[0] = PKT.IP_PROTOCOL;\n                 ^^^^^^^^^^^"
    );
    assert_eq!(reject("BREAK", 16).message(), "BREAK outside a FOR loop");
    assert_eq!(reject("R[0] = x", 16).message(), "unknown name `x`");
    assert_eq!(
        reject("R[0] = PKT.W[0].U8[2]", 16).message(),
        "sub-field index 2 is out of range: a 16-bit load has 2 fields of 8 bits"
    );
}

#[test]
fn random_text_never_panics() {
    use netsift_capture::generate::XorShift64;
    let alphabet: Vec<&str> = vec![
        "R[",
        "MEM[",
        "]",
        "(",
        ")",
        "PKT.",
        "B",
        "W",
        "DW",
        ".U1",
        "[",
        "IF",
        "THEN",
        "ELSE",
        "FI",
        "FOR",
        "ROF",
        ";",
        "BREAK",
        "RETURN",
        "HASH",
        "EXTERN",
        ",",
        "=",
        "+=",
        "++",
        "--",
        "<<",
        "1",
        "0x10",
        "99999999999999999999",
        "TRUE",
        "IP_PROTO",
        " ",
        "\n",
        "//",
        "\"",
        "é",
        "&&",
        "!",
        "~",
        "<",
        "FlowCount",
    ];
    let mut rng = XorShift64::new(42);
    let reg = Registry::standard();
    for _ in 0..20_000 {
        let n = rng.below(30) as usize;
        let s: String = (0..n)
            .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
            .collect();
        if let Err(e) = Program::compile(&s, &reg, 256) {
            let _ = e.render(&s);
        }
    }
}

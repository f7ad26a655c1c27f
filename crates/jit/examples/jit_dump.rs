//! Write the machine code of a program (tcpdump -ddd text on stdin) to a file, for objdump:
//! `netsift compile -ddd EXPR | cargo run -p netsift-jit --example jit_dump -- out.bin`
//! then `objdump -D -b binary -m i386:x86-64 -M intel out.bin`.
use std::io::Read;

fn main() {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).expect("stdin");
    let prog = netsift_bpf::asm::parse_any(&text).expect("a -d/-dd/-ddd program");
    let j = netsift_jit::JitFilter::new(prog, netsift_bpf::Rules::Libpcap).expect("compiles");
    let out = std::env::args().nth(1).unwrap_or_else(|| "jit.bin".into());
    std::fs::write(&out, j.code()).expect("write");
    eprintln!(
        "{} bytes of code for {} instructions",
        j.code_len(),
        j.program().len()
    );
}

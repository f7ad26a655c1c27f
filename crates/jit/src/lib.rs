//! Native x86-64 code for classic BPF filters.
//!
//! [`JitFilter::new`] validates a program (with the same [`Rules`] as the interpreter), compiles
//! it to machine code and maps the code executable; [`JitFilter::run`] then gives exactly the
//! interpreter's result on every packet (libpcap 1.10's semantics: big-endian loads, 0 for a load
//! past the captured bytes, 0 for division or modulo by X = 0, shifts by X of 32 or more give 0,
//! ancillary loads out of bounds, the `ret` value as the result; the loop budget of
//! [`netsift_bpf::LOOP_BUDGET`] instructions for programs with backward jumps).
//!
//! The code generator is a hand-written emitter (`asm`, about thirty instruction forms) rather
//! than an assembler crate: the forms needed are few, each is tested against GNU as, and it keeps
//! the build free of proc macros and build scripts; a 100-instruction program compiles in a few
//! microseconds. See `codegen` for register use, folded bounds checks and jeq chains.
//!
//! # Safety
//!
//! - Code pages are mapped read-write, filled, then switched to read-execute (`mprotect`): never
//!   writable and executable at once. They are unmapped when the filter is dropped.
//! - Code size is bounded (1 MiB; a 4096-instruction program needs a small fraction of it), and
//!   so is program size (the validator's limit).
//! - Generated code reads the packet only after a bounds check against the captured length it is
//!   given, which is the length of the slice passed to [`JitFilter::run`]; packets of 2 GiB or
//!   more go to the interpreter. Programs the validator accepts compile or give an error.
//!
//! [`available`] says whether this machine can run generated code; on other architectures every
//! constructor returns an error of kind [`JitErrorKind::Unsupported`] and callers (the `netsift`
//! meta filter) fall back to the interpreter.

#![deny(missing_docs)]

#[cfg(target_arch = "x86_64")]
pub mod asm;
#[cfg(target_arch = "x86_64")]
mod codegen;

use std::fmt;

use netsift_bpf::{Filter, Program, Rules, ValidateError};

/// What kind of problem a [`JitError`] is.
///
/// New kinds may be added; match with a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JitErrorKind {
    /// The program is not valid under the rules given.
    Invalid,
    /// This architecture has no code generator.
    Unsupported,
    /// Executable memory could not be mapped (a hardened kernel, `ulimit`, SELinux…).
    Memory,
    /// The generated code would exceed its size bound.
    TooLarge,
}

/// Why a program could not be compiled to native code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JitError {
    kind: JitErrorKind,
    message: String,
}

impl JitError {
    pub(crate) fn new(kind: JitErrorKind, message: String) -> JitError {
        JitError { kind, message }
    }

    /// The kind of problem.
    pub fn kind(&self) -> JitErrorKind {
        self.kind
    }
}

impl fmt::Display for JitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JitError {}

impl From<ValidateError> for JitError {
    fn from(e: ValidateError) -> JitError {
        JitError::new(JitErrorKind::Invalid, e.to_string())
    }
}

/// Whether generated code can run here (x86-64, and executable memory can be mapped).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *OK.get_or_init(|| exec::ExecMem::new(&[0xc3]).is_ok())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
type Entry = unsafe extern "sysv64" fn(*const u8, usize, u32) -> u32;
#[cfg(target_arch = "x86_64")]
type BatchEntry = unsafe extern "sysv64" fn(*const codegen::Desc, usize, *mut u32);

/// A classic BPF program compiled to native code.
pub struct JitFilter {
    #[cfg(target_arch = "x86_64")]
    code: exec::ExecMem,
    #[cfg(target_arch = "x86_64")]
    entry: Entry,
    #[cfg(target_arch = "x86_64")]
    batch: BatchEntry,
    /// The interpreter, for packets too large for the generated code's offsets.
    interp: Filter,
}

impl fmt::Debug for JitFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JitFilter")
            .field("insns", &self.interp.program().len())
            .field("code_len", &self.code_len())
            .finish()
    }
}

impl JitFilter {
    /// Validates `program` with `rules` and compiles it.
    pub fn new(program: Program, rules: Rules) -> Result<JitFilter, JitError> {
        let interp = Filter::new(program, rules)?;
        Self::from_filter(interp)
    }

    /// Compiles the program of an interpreter filter (already validated).
    pub fn from_filter(interp: Filter) -> Result<JitFilter, JitError> {
        #[cfg(target_arch = "x86_64")]
        {
            let code = codegen::compile(interp.program())?;
            let mem = exec::ExecMem::new(&code.bytes)?;
            // SAFETY: the mapping holds code generated for the System V calling convention with
            // exactly these signatures at offsets 0 and `code.batch`; it stays mapped (and
            // read-execute) while `self` lives.
            let (entry, batch) = unsafe {
                (
                    std::mem::transmute::<*const u8, Entry>(mem.ptr()),
                    std::mem::transmute::<*const u8, BatchEntry>(mem.ptr().add(code.batch)),
                )
            };
            Ok(JitFilter {
                code: mem,
                entry,
                batch,
                interp,
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = interp;
            Err(JitError::new(
                JitErrorKind::Unsupported,
                format!("no native code generator for {}", std::env::consts::ARCH),
            ))
        }
    }

    /// The program.
    pub fn program(&self) -> &Program {
        self.interp.program()
    }

    /// Bytes of machine code.
    pub fn code_len(&self) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            self.code.code_len()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            0
        }
    }

    /// The machine code (for disassembly in tests and tools).
    pub fn code(&self) -> &[u8] {
        #[cfg(target_arch = "x86_64")]
        {
            self.code.bytes()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            &[]
        }
    }

    /// Runs the filter on one packet: `data` is the captured bytes, `wire_len` the length on
    /// the wire. Returns the number of bytes to keep; 0 rejects.
    #[inline]
    pub fn run(&self, data: &[u8], wire_len: u32) -> u32 {
        #[cfg(target_arch = "x86_64")]
        {
            if data.len() < codegen::MAX_CAPLEN {
                // SAFETY: the code reads at most `data.len()` bytes from `data.as_ptr()` (every
                // load is checked against that length, which is below the bound the code
                // generator assumes) and touches no other memory but its own red zone.
                return unsafe { (self.entry)(data.as_ptr(), data.len(), wire_len) };
            }
        }
        self.interp.run(data, wire_len)
    }

    /// Runs the filter on many packets, writing one result per packet into `out` (cleared
    /// first). The packets go to the generated code 64 at a time, through its batch entry,
    /// which loops over them without returning to Rust.
    pub fn run_batch<'a, I>(&self, packets: I, out: &mut Vec<u32>)
    where
        I: IntoIterator<Item = (&'a [u8], u32)>,
    {
        out.clear();
        #[cfg(target_arch = "x86_64")]
        {
            let mut descs = [codegen::Desc {
                ptr: std::ptr::null(),
                len: 0,
                wire_len: 0,
            }; 64];
            let mut big: Vec<(usize, &'a [u8], u32)> = Vec::new();
            let mut it = packets.into_iter();
            loop {
                let mut n = 0;
                for (d, l) in it.by_ref() {
                    if d.len() >= codegen::MAX_CAPLEN {
                        big.push((out.len() + n, d, l));
                        descs[n] = codegen::Desc {
                            ptr: std::ptr::null(),
                            len: 0,
                            wire_len: l,
                        };
                    } else {
                        descs[n] = codegen::Desc {
                            ptr: d.as_ptr(),
                            len: d.len(),
                            wire_len: l,
                        };
                    }
                    n += 1;
                    if n == descs.len() {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
                out.reserve(n);
                // SAFETY: `descs[..n]` describe live slices (or empty ones with a null pointer,
                // which the code never reads since their length is 0); the code writes exactly
                // n results into the reserved spare capacity, which then becomes initialised.
                unsafe {
                    (self.batch)(descs.as_ptr(), n, out.as_mut_ptr().add(out.len()));
                    out.set_len(out.len() + n);
                }
                if n < descs.len() {
                    break;
                }
            }
            for (i, d, l) in big {
                out[i] = self.interp.run(d, l);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        out.extend(packets.into_iter().map(|(d, l)| self.run(d, l)));
    }
}

#[cfg(target_arch = "x86_64")]
pub mod exec {
    //! Executable memory: mapped read-write, filled, then made read-execute. Public for other
    //! native back ends (`netsift-fpl`).
    //!
    //! [`ExecMem::new`] copies finished machine code into a fresh anonymous mapping, pads the
    //! last page with `int3` and switches it to read-execute; the mapping is never writable and
    //! executable at once, and is unmapped on drop.

    use crate::{JitError, JitErrorKind};

    /// A read-execute mapping holding machine code.
    pub struct ExecMem {
        ptr: *mut u8,
        len: usize,
        code_len: usize,
    }

    // SAFETY: after construction the mapping is read-only (read-execute) and never written, so
    // sharing it between threads is sound.
    unsafe impl Send for ExecMem {}
    // SAFETY: as above.
    unsafe impl Sync for ExecMem {}

    impl ExecMem {
        /// Maps `code` read-execute (errors of kind [`JitErrorKind::Memory`]).
        pub fn new(code: &[u8]) -> Result<ExecMem, JitError> {
            let page = 4096;
            let len = code.len().div_ceil(page).max(1) * page;
            // SAFETY: a fresh private anonymous mapping, not aliased by anything.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(JitError::new(
                    JitErrorKind::Memory,
                    format!(
                        "cannot map memory for code: {}",
                        std::io::Error::last_os_error()
                    ),
                ));
            }
            let ptr = p.cast::<u8>();
            // SAFETY: `code.len() <= len` bytes into the fresh writable mapping; then the whole
            // mapping becomes read-execute.
            unsafe {
                std::ptr::copy_nonoverlapping(code.as_ptr(), ptr, code.len());
                // Pad with int3 so a stray jump past the end traps.
                std::ptr::write_bytes(ptr.add(code.len()), 0xcc, len - code.len());
                if libc::mprotect(p, len, libc::PROT_READ | libc::PROT_EXEC) != 0 {
                    let e = std::io::Error::last_os_error();
                    libc::munmap(p, len);
                    return Err(JitError::new(
                        JitErrorKind::Memory,
                        format!("cannot make code executable: {e}"),
                    ));
                }
            }
            Ok(ExecMem {
                ptr,
                len,
                code_len: code.len(),
            })
        }

        /// The first byte of the code.
        pub fn ptr(&self) -> *const u8 {
            self.ptr
        }

        /// Bytes of code (without the padding).
        pub fn code_len(&self) -> usize {
            self.code_len
        }

        /// The code.
        pub fn bytes(&self) -> &[u8] {
            // SAFETY: the first `code_len` bytes of the live, readable mapping.
            unsafe { std::slice::from_raw_parts(self.ptr, self.code_len) }
        }
    }

    impl Drop for ExecMem {
        fn drop(&mut self) {
            // SAFETY: unmapping exactly this mapping; no reference into it outlives `self`
            // (the entry pointer lives in the same `JitFilter`).
            unsafe {
                libc::munmap(self.ptr.cast(), self.len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsift_bpf::Insn;
    use netsift_bpf::code::*;

    fn both(insns: &[Insn], data: &[u8], wire: u32) -> (u32, u32) {
        let p = Program::new(insns.to_vec());
        let i = Filter::new(p.clone(), Rules::Libpcap).unwrap();
        let j = JitFilter::new(p, Rules::Libpcap).unwrap();
        (i.run(data, wire), j.run(data, wire))
    }

    #[test]
    fn basic_programs_match_the_interpreter() {
        let pkt: Vec<u8> = (0..64u8).collect();
        let progs: Vec<Vec<Insn>> = vec![
            vec![Insn::stmt(RET | K, 96)],
            vec![Insn::stmt(LD | W | ABS, 2), Insn::stmt(RET | A, 0)],
            vec![Insn::stmt(LD | H | ABS, 62), Insn::stmt(RET | A, 0)],
            vec![Insn::stmt(LD | H | ABS, 63), Insn::stmt(RET | A, 0)],
            vec![Insn::stmt(LD | B | ABS, 63), Insn::stmt(RET | A, 0)],
            vec![
                Insn::stmt(LDX | B | MSH, 0),
                Insn::stmt(LD | H | IND, 60),
                Insn::stmt(RET | A, 0),
            ],
            vec![
                Insn::stmt(LDX | IMM, 0xffff_ffff),
                Insn::stmt(LD | B | IND, 2),
                Insn::stmt(RET | A, 0),
            ],
            vec![
                Insn::stmt(LD | W | LEN, 0),
                Insn::stmt(ST, 3),
                Insn::stmt(LDX | MEM, 3),
                Insn::stmt(MISC | TXA, 0),
                Insn::stmt(RET | A, 0),
            ],
            vec![
                Insn::stmt(LD | IMM, 7),
                Insn::stmt(LDX | IMM, 0),
                Insn::stmt(ALU | DIV | X, 0),
                Insn::stmt(RET | K, 1),
            ],
            vec![
                Insn::stmt(LD | IMM, 7),
                Insn::stmt(LDX | IMM, 2),
                Insn::stmt(ALU | MOD | X, 0),
                Insn::stmt(RET | A, 0),
            ],
            vec![
                Insn::stmt(LD | IMM, 1),
                Insn::stmt(LDX | IMM, 32),
                Insn::stmt(ALU | LSH | X, 0),
                Insn::stmt(RET | A, 0),
            ],
            vec![
                Insn::stmt(LD | IMM, 0x8000_0000),
                Insn::stmt(LDX | IMM, 31),
                Insn::stmt(ALU | RSH | X, 0),
                Insn::stmt(RET | A, 0),
            ],
            vec![
                Insn::stmt(LD | IMM, 5),
                Insn::stmt(ALU | NEG, 0),
                Insn::stmt(ALU | MUL | K, 3),
                Insn::stmt(RET | A, 0),
            ],
            vec![
                Insn::stmt(LD | B | ABS, 5),
                Insn::jump(JMP | JGT | K, 4, 0, 1),
                Insn::stmt(RET | K, 1),
                Insn::stmt(RET | K, 2),
            ],
            vec![
                Insn::stmt(LD | B | ABS, 5),
                Insn::jump(JMP | JSET | K, 1, 1, 0),
                Insn::stmt(RET | K, 1),
                Insn::stmt(RET | K, 2),
            ],
            vec![
                Insn::stmt(LD | W | ABS, SKF_AD_OFF + 4),
                Insn::stmt(RET | K, 1),
            ],
        ];
        for p in &progs {
            for cut in [0, 1, 3, 5, 6, 61, 62, 63, 64] {
                let (i, j) = both(p, &pkt[..cut], 64);
                assert_eq!(i, j, "{p:?} on {cut} bytes");
            }
        }
    }

    #[test]
    fn jeq_chains_become_searches() {
        // ld [0]; 6 jeqs to "accept 1..6", default reject.
        let mut p = vec![Insn::stmt(LD | B | ABS, 0)];
        let vals = [9u32, 3, 7, 3, 1, 200];
        for (n, v) in vals.iter().enumerate() {
            let left = vals.len() - n - 1;
            p.push(Insn::jump(JMP | JEQ | K, *v, (left + 1 + n) as u8, 0));
        }
        p.push(Insn::stmt(RET | K, 0));
        for r in 1..=6 {
            p.push(Insn::stmt(RET | K, r));
        }
        for b in 0..=255u8 {
            let (i, j) = both(&p, &[b], 1);
            assert_eq!(i, j, "byte {b}");
        }
    }

    #[test]
    fn membership_chains_match() {
        // ld [0] (a word); jeq v1..vn -> accept; else reject. Sizes 4..40, values with gaps,
        // duplicates and the extremes.
        for n in [4usize, 5, 7, 8, 9, 16, 38, 40] {
            let vals: Vec<u32> = (0..n as u32)
                .map(|i| if i == 3 { u32::MAX } else { i * 7 % 50 })
                .collect();
            let mut p = vec![Insn::stmt(LD | W | ABS, 0)];
            for (j, v) in vals.iter().enumerate() {
                let left = (n - j - 1) as u8;
                // The last one falls through to `ret #0` too.
                p.push(Insn::jump(JMP | JEQ | K, *v, left + 1, 0));
            }
            p.push(Insn::stmt(RET | K, 0));
            p.push(Insn::stmt(RET | K, 1));
            for key in (0..60u32).chain([u32::MAX, u32::MAX - 1, 1 << 31]) {
                let (i, j) = both(&p, &key.to_be_bytes(), 4);
                assert_eq!(i, j, "n {n} key {key}");
            }
        }
    }

    #[test]
    fn loops_respect_the_budget() {
        // Count down from the packet's first byte forever: the budget ends it with 0.
        let p = vec![
            Insn::stmt(LD | B | ABS, 0),
            Insn::stmt(ALU | ADD | K, 1),
            Insn::stmt(JMP | JA, (-2i32) as u32),
            Insn::stmt(RET | K, 1),
        ];
        let prog = Program::new(p);
        let j = JitFilter::new(prog.clone(), Rules::Libpcap).unwrap();
        let i = Filter::new(prog, Rules::Libpcap).unwrap();
        assert_eq!(j.run(&[1], 1), i.run(&[1], 1));
    }

    #[test]
    fn code_is_never_writable() {
        let j = JitFilter::new(Program::new(vec![Insn::stmt(RET | K, 1)]), Rules::Kernel).unwrap();
        let addr = j.code().as_ptr() as usize;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| {
                let r = l.split_whitespace().next().unwrap();
                let (a, b) = r.split_once('-').unwrap();
                let (a, b) = (
                    usize::from_str_radix(a, 16).unwrap(),
                    usize::from_str_radix(b, 16).unwrap(),
                );
                (a..b).contains(&addr)
            })
            .unwrap();
        assert!(
            line.split_whitespace().nth(1).unwrap().starts_with("r-x"),
            "{line}"
        );
    }
}

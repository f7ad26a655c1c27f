//! libpcap's `<pcap/bpf.h>` functions: `bpf_filter`, `bpf_validate` and `bpf_image`, on
//! netsift's interpreter, validator and printer.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint};

use netsift_bpf::{Insn, MAX_LIBPCAP_INSNS, Program, asm, code, libpcap_bpf_validate};
use netsift_capture::LinkType;
use netsift_filter::{Choice, Engine, Filter, Input, Target};

use crate::ffi::BpfInsn;

fn insn_of(i: &BpfInsn) -> Insn {
    Insn {
        code: i.code,
        jt: i.jt,
        jf: i.jf,
        k: i.k,
    }
}

/// A program built for the interpreter, kept per thread: programs call `bpf_filter` and
/// `pcap_offline_filter` once per packet with the same program.
struct Cached {
    insns: Vec<Insn>,
    filter: Option<Filter>,
}

thread_local! {
    static CACHE: RefCell<Option<Cached>> = const { RefCell::new(None) };
}

/// Whether the program at `pc` is the cached one. Instructions are compared in order and the
/// comparison stops at the first difference, so it reads no instruction past the reachable
/// end of the program at `pc` (were all instructions before a difference equal, the cached
/// program would reach no further than the one at `pc`).
///
/// # Safety
/// `pc` must point to a program whose reachable instructions are readable.
unsafe fn same_as(cached: &[Insn], pc: *const BpfInsn) -> bool {
    cached.iter().enumerate().all(|(i, c)| {
        // SAFETY: see the function's documentation.
        insn_of(unsafe { &*pc.add(i) }) == *c
    })
}

/// Which instructions of the program at `pc` libpcap's interpreter can run, following both
/// ways of each conditional jump and stopping at each `ret`. With `len`, the flags cover the
/// `len` instructions (targets beyond them are left to validation, which rejects the jump);
/// without it (`bpf_filter` is given no length), they end at the highest reachable
/// instruction. `None` beyond [`MAX_LIBPCAP_INSNS`] or before the start.
///
/// # Safety
/// `pc` must point to `len` instructions (or, without `len`, to a program whose reachable
/// instructions are readable).
unsafe fn reachable(pc: *const BpfInsn, len: Option<usize>) -> Option<Vec<bool>> {
    let mut seen = vec![false; len.unwrap_or(64)];
    let mut stack = vec![0usize];
    let mut end = 0;
    while let Some(i) = stack.pop() {
        if len.is_some_and(|n| i >= n) {
            continue;
        }
        if i >= MAX_LIBPCAP_INSNS {
            return None;
        }
        if i >= seen.len() {
            seen.resize((i + 1).next_power_of_two(), false);
        }
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        end = end.max(i + 1);
        // SAFETY: `i` is reachable.
        let insn = insn_of(unsafe { &*pc.add(i) });
        match code::class(insn.code) {
            code::RET => {}
            code::JMP if code::op(insn.code) == code::JA => {
                // libpcap sign-extends `k` (backward jumps implement `ip6 protochain`).
                let to = i as i64 + 1 + i64::from(insn.k as i32);
                match usize::try_from(to) {
                    Ok(to) => stack.push(to),
                    Err(_) => return None,
                }
            }
            code::JMP => {
                stack.push(i + 1 + usize::from(insn.jt));
                stack.push(i + 1 + usize::from(insn.jf));
            }
            _ => stack.push(i + 1),
        }
    }
    seen.truncate(len.unwrap_or(end));
    Some(seen)
}

/// `ret #0`, put in place of the instructions that cannot run: libpcap's interpreter never
/// looks at them, so their opcodes, jump targets and constants must not make netsift's
/// validation refuse the program.
const DEAD: Insn = Insn {
    code: code::RET | code::K,
    jt: 0,
    jf: 0,
    k: 0,
};

/// Runs the program at `pc` (of `len` instructions, or `None`: as far as it reaches) on one
/// packet with netsift's interpreter, reusing the thread's cached build. 0 for a program the
/// interpreter refuses (libpcap's interpreter would abort or read out of bounds on those).
///
/// # Safety
/// `pc` must point to `len` instructions (or, without `len`, to a program whose reachable
/// instructions are readable).
pub(crate) unsafe fn run(pc: *const BpfInsn, len: Option<usize>, data: &[u8], wire: u32) -> u32 {
    CACHE.with(|cell| {
        let mut cache = cell.borrow_mut();
        // An empty cached program (one netsift could not delimit) matches nothing.
        // SAFETY: the caller's contract.
        let hit = cache.as_ref().is_some_and(|c| {
            !c.insns.is_empty()
                && len.is_none_or(|n| n == c.insns.len())
                && unsafe { same_as(&c.insns, pc) }
        });
        if !hit {
            // SAFETY: the caller's contract.
            let live = unsafe { reachable(pc, len) }.unwrap_or_default();
            // SAFETY: the flags cover readable instructions (all of them below the highest
            // reachable one, or the caller's `len`).
            let insns: Vec<Insn> = (0..live.len())
                .map(|i| insn_of(unsafe { &*pc.add(i) }))
                .collect();
            let runnable = insns
                .iter()
                .zip(&live)
                .map(|(&i, &runs)| if runs { i } else { DEAD })
                .collect();
            let program = Program::new(runnable);
            // One packet at a time: the interpreter (building native code would cost more
            // than the runs between two programs).
            let filter = Filter::build(
                Input::Program(&program),
                &Target::live(LinkType::ETHERNET, u32::MAX),
                Choice::only(Engine::Interpreter),
            )
            .ok();
            *cache = Some(Cached { insns, filter });
        }
        match cache.as_mut().and_then(|c| c.filter.as_mut()) {
            Some(f) => f.run(data, wire),
            None => 0,
        }
    })
}

/// `u_int bpf_filter(const struct bpf_insn *pc, const u_char *p, u_int wirelen, u_int
/// buflen)`: runs a program on a packet of `buflen` captured bytes (`wirelen` on the wire);
/// the program's return value. A null program accepts everything (`(u_int)-1`), as in libpcap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bpf_filter(
    pc: *const BpfInsn,
    p: *const u8,
    wirelen: c_uint,
    buflen: c_uint,
) -> c_uint {
    guard!(0, {
        if pc.is_null() {
            return u32::MAX;
        }
        let data: &[u8] = if p.is_null() || buflen == 0 {
            &[]
        } else {
            // SAFETY: the caller's `buflen` bytes at `p`.
            unsafe { std::slice::from_raw_parts(p, buflen as usize) }
        };
        // SAFETY: the caller's program.
        unsafe { run(pc, None, data, wirelen) }
    })
}

/// `int bpf_validate(const struct bpf_insn *f, int len)`: 1 if libpcap's checks pass (see
/// [`libpcap_bpf_validate`]), 0 otherwise.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bpf_validate(f: *const BpfInsn, len: c_int) -> c_int {
    guard!(0, {
        let Ok(n) = usize::try_from(len) else {
            return 0;
        };
        if n == 0 || f.is_null() {
            return 0;
        }
        // SAFETY: the caller's `len` instructions.
        let insns: Vec<Insn> = unsafe { std::slice::from_raw_parts(f, n) }
            .iter()
            .map(insn_of)
            .collect();
        c_int::from(libpcap_bpf_validate(&insns))
    })
}

/// The buffer `bpf_image` returns (libpcap's is a static too).
struct ImageBuf(std::cell::UnsafeCell<[c_char; 256]>);
// SAFETY: as libpcap's static buffer; `bpf_image` is not thread-safe in libpcap either.
unsafe impl Sync for ImageBuf {}
static IMAGE: ImageBuf = ImageBuf(std::cell::UnsafeCell::new([0; 256]));

/// `char *bpf_image(const struct bpf_insn *p, int n)`: one instruction as `tcpdump -d` prints
/// it, `n` being its index, in a static buffer. A negative `n` is printed as 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bpf_image(p: *const BpfInsn, n: c_int) -> *mut c_char {
    let buf = IMAGE.0.get();
    guard!(buf.cast::<c_char>(), {
        // SAFETY: the static buffer, written here only.
        let out = unsafe { &mut *buf };
        // SAFETY: a valid instruction or null.
        let text = match unsafe { p.as_ref() } {
            Some(i) => asm::image(&insn_of(i), usize::try_from(n).unwrap_or(0)),
            None => String::new(),
        };
        crate::handle::write_errbuf(out, &text);
        out.as_mut_ptr()
    })
}

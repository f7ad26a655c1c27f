//! libpcap as a benchmark baseline, loaded with `dlopen` at run time.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};

use netsift_bpf::{Insn, Program};

#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut Insn,
}

type OpenDead = unsafe extern "C" fn(c_int, c_int) -> *mut c_void;
type Compile =
    unsafe extern "C" fn(*mut c_void, *mut BpfProgram, *const c_char, c_int, u32) -> c_int;
type FreeCode = unsafe extern "C" fn(*mut BpfProgram);
type Close = unsafe extern "C" fn(*mut c_void);
type GetErr = unsafe extern "C" fn(*mut c_void) -> *mut c_char;
type BpfFilter = unsafe extern "C" fn(*const Insn, *const u8, c_uint, c_uint) -> c_uint;
type LibVersion = unsafe extern "C" fn() -> *const c_char;

/// The libpcap functions the benchmarks call.
pub struct Libpcap {
    open_dead: OpenDead,
    compile: Compile,
    freecode: FreeCode,
    close: Close,
    geterr: GetErr,
    filter: BpfFilter,
    version: LibVersion,
}

/// Names tried, in order, by [`Libpcap::load`].
const LIBRARY_NAMES: [&str; 3] = ["libpcap.so.0.8", "libpcap.so.1", "libpcap.so"];

impl Libpcap {
    /// Load libpcap. Returns a message saying what to install when it cannot be found.
    pub fn load() -> Result<Libpcap, String> {
        for name in LIBRARY_NAMES {
            let cname = CString::new(name).unwrap_or_default();
            // SAFETY: dlopen with a valid C string; the handle is never closed, so the function
            // pointers below stay valid for the life of the process.
            let handle = unsafe { libc::dlopen(cname.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            if handle.is_null() {
                continue;
            }
            let sym = |s: &str| -> Result<*mut c_void, String> {
                let c = CString::new(s).unwrap_or_default();
                // SAFETY: handle is a live dlopen handle, c a valid C string.
                let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
                if p.is_null() {
                    Err(format!("{name} has no symbol {s}"))
                } else {
                    Ok(p)
                }
            };
            // SAFETY: each symbol has the C signature of libpcap's public API that its type
            // alias spells out.
            let lib = unsafe {
                Libpcap {
                    open_dead: std::mem::transmute::<*mut c_void, OpenDead>(sym("pcap_open_dead")?),
                    compile: std::mem::transmute::<*mut c_void, Compile>(sym("pcap_compile")?),
                    freecode: std::mem::transmute::<*mut c_void, FreeCode>(sym("pcap_freecode")?),
                    close: std::mem::transmute::<*mut c_void, Close>(sym("pcap_close")?),
                    geterr: std::mem::transmute::<*mut c_void, GetErr>(sym("pcap_geterr")?),
                    filter: std::mem::transmute::<*mut c_void, BpfFilter>(sym("bpf_filter")?),
                    version: std::mem::transmute::<*mut c_void, LibVersion>(sym(
                        "pcap_lib_version",
                    )?),
                }
            };
            // netsift's own libpcap-compatible library (netsift-pcap) is no baseline.
            if lib.version().contains("netsift") {
                continue;
            }
            return Ok(lib);
        }
        Err(
            "libpcap is not installed (the baseline of the benchmarks): install it, e.g. \
             `apt-get install libpcap0.8`"
                .into(),
        )
    }

    /// libpcap's version string.
    pub fn version(&self) -> String {
        // SAFETY: returns a static C string.
        unsafe { CStr::from_ptr((self.version)()) }
            .to_string_lossy()
            .into_owned()
    }

    /// Compile `expr` for DLT `dlt` with `pcap_compile` (netmask unknown).
    pub fn compile(
        &self,
        dlt: i32,
        snaplen: i32,
        expr: &str,
        optimize: bool,
    ) -> Result<LibpcapProgram<'_>, String> {
        let cexpr = CString::new(expr).map_err(|_| "expression contains NUL".to_string())?;
        // SAFETY: a dead handle we own and close; instructions are copied before freecode.
        unsafe {
            let p = (self.open_dead)(dlt, snaplen);
            if p.is_null() {
                return Err("pcap_open_dead failed".into());
            }
            let mut prog = BpfProgram {
                bf_len: 0,
                bf_insns: std::ptr::null_mut(),
            };
            let rc = (self.compile)(
                p,
                &mut prog,
                cexpr.as_ptr(),
                c_int::from(optimize),
                0xffff_ffff,
            );
            let out = if rc != 0 {
                Err(CStr::from_ptr((self.geterr)(p))
                    .to_string_lossy()
                    .into_owned())
            } else {
                let v = std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize).to_vec();
                (self.freecode)(&mut prog);
                Ok(LibpcapProgram {
                    lib: self,
                    program: Program::new(v),
                })
            };
            (self.close)(p);
            out
        }
    }
}

/// A dead handle (`pcap_open_dead`) kept open for repeated `pcap_compile` calls: what a program
/// that compiles filters pays per filter, without the handle's own creation.
pub struct DeadHandle<'a> {
    lib: &'a Libpcap,
    p: *mut c_void,
}

impl Libpcap {
    /// A dead handle for DLT `dlt` and snapshot length `snaplen`.
    pub fn dead(&self, dlt: i32, snaplen: i32) -> Result<DeadHandle<'_>, String> {
        // SAFETY: pcap_open_dead has no preconditions; the handle is closed on drop.
        let p = unsafe { (self.open_dead)(dlt, snaplen) };
        if p.is_null() {
            return Err("pcap_open_dead failed".into());
        }
        Ok(DeadHandle { lib: self, p })
    }
}

impl DeadHandle<'_> {
    /// `pcap_compile` then `pcap_freecode`: the number of instructions (netmask unknown).
    pub fn compile_len(&self, expr: &CStr, optimize: bool) -> Result<usize, String> {
        let mut prog = BpfProgram {
            bf_len: 0,
            bf_insns: std::ptr::null_mut(),
        };
        // SAFETY: a live handle, a NUL-terminated expression, a program freed right after.
        unsafe {
            if (self.lib.compile)(
                self.p,
                &mut prog,
                expr.as_ptr(),
                c_int::from(optimize),
                0xffff_ffff,
            ) != 0
            {
                return Err(CStr::from_ptr((self.lib.geterr)(self.p))
                    .to_string_lossy()
                    .into_owned());
            }
            let n = prog.bf_len as usize;
            (self.lib.freecode)(&mut prog);
            Ok(n)
        }
    }
}

impl Drop for DeadHandle<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from pcap_open_dead and is closed once.
        unsafe { (self.lib.close)(self.p) }
    }
}

/// A program compiled by libpcap's `pcap_compile`, run by its `bpf_filter`.
pub struct LibpcapProgram<'a> {
    lib: &'a Libpcap,
    program: Program,
}

impl LibpcapProgram<'_> {
    /// The instructions libpcap produced.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Run `bpf_filter` on one packet.
    #[inline]
    pub fn run(&self, data: &[u8], wire_len: u32) -> u32 {
        // SAFETY: the program came from pcap_compile, which only emits programs its interpreter
        // accepts; bpf_filter reads at most data.len() bytes of data.
        unsafe {
            (self.lib.filter)(
                self.program.insns().as_ptr(),
                data.as_ptr(),
                wire_len,
                data.len() as c_uint,
            )
        }
    }
}

//! The global allocator of netsift's command line: mimalloc, through its plain entry points.
//!
//! The `mimalloc` crate hands every request to `mi_malloc_aligned`. For alignments below 8
//! (a program's instructions are 4-byte aligned) mimalloc 3 takes its general aligned path,
//! about 150 instructions where `mi_malloc` takes about 20: a tenth of compiling `ip`. Blocks
//! from `mi_malloc` are aligned to 16 bytes, or to their size when smaller (the C allocator's
//! contract, which the `mimalloc` crate itself relied on before it went through the aligned
//! entry points); other requests still go to them.

use std::alloc::{GlobalAlloc, Layout};

use libmimalloc_sys as mi;

/// Alignment `mi_malloc` gives every block at least this large.
const MIN_ALIGN: usize = 16;

/// mimalloc as the global allocator: `#[global_allocator] static A: Mi = Mi;`.
pub struct Mi;

/// Whether `mi_malloc`'s alignment suffices for a block of `size` bytes aligned to `align`.
fn plain(align: usize, size: usize) -> bool {
    align <= MIN_ALIGN && align <= size
}

/// A block for `layout` from `plain` (size) when its alignment suffices, else from `aligned`
/// (size, alignment).
///
/// # Safety
/// The two functions must be mimalloc's entry points of one kind (allocating or zeroing).
unsafe fn block(
    layout: Layout,
    plain_fn: unsafe extern "C" fn(usize) -> *mut std::ffi::c_void,
    aligned_fn: unsafe extern "C" fn(usize, usize) -> *mut std::ffi::c_void,
) -> *mut u8 {
    // SAFETY: FFI calls that accept any size (the caller's contract names them).
    unsafe {
        if plain(layout.align(), layout.size()) {
            plain_fn(layout.size()).cast()
        } else {
            aligned_fn(layout.size(), layout.align()).cast()
        }
    }
}

// SAFETY: every block comes from mimalloc and goes back to it (`mi_free` takes the blocks of
// every entry point used here); alignment is as the module documentation says.
unsafe impl GlobalAlloc for Mi {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocating entry points.
        unsafe { block(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's zeroing entry points.
        unsafe { block(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the caller's contract).
        unsafe { mi::mi_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (the caller's contract); the
        // new block is aligned by the same rule as `alloc`'s.
        unsafe {
            if plain(layout.align(), new_size) {
                mi::mi_realloc(ptr.cast(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every size and alignment are aligned, writable, and survive growing.
    #[test]
    fn blocks_are_aligned_and_keep_their_contents() {
        let a = Mi;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 2, 3, 4, 7, 8, 15, 16, 24, 100, 1000, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; the block is used within its size and freed once.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "{size} {align}");
                    std::ptr::write_bytes(p, 0xa5, size);
                    let q = a.realloc(p, layout, size * 3);
                    assert_eq!(q as usize % align, 0, "{size} {align} grown");
                    assert!((0..size).all(|i| *q.add(i) == 0xa5));
                    a.dealloc(q, Layout::from_size_align(size * 3, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }
}

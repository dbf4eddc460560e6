//! Compiling a hot loop once per vector width and picking the widest the
//! CPU has at run time.
//!
//! The crate is built for baseline x86-64 (SSE2), so plain Rust loops
//! vectorize four lanes wide. [`widest!`] wraps a function so that its body
//! is also compiled with AVX2 + FMA and with AVX-512, and each call runs the
//! copy the CPU supports (the check is a cached flag). The body and what it
//! calls must be `#[inline(always)]` for the wider copies to reach them.

/// Defines `fn $name(args)` whose body runs compiled for the widest vector
/// unit the CPU has (AVX-512F, AVX2 + FMA, or the baseline).
macro_rules! widest {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$meta])*
        #[allow(clippy::too_many_arguments, reason = "the wrapped function's own arguments")]
        $vis fn $name($($arg: $ty),*) {
            #[inline(always)]
            #[allow(clippy::too_many_arguments, reason = "the wrapped function's own arguments")]
            fn body($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                #[allow(clippy::too_many_arguments, reason = "the wrapped function's own arguments")]
                fn avx512($($arg: $ty),*) {
                    body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments, reason = "the wrapped function's own arguments")]
                fn avx2($($arg: $ty),*) {
                    body($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has AVX-512F, checked on the line above.
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU has AVX2 and FMA, checked just above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}

pub(super) use widest;

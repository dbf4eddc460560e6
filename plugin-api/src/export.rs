//! The macros that make a crate a plugin: [`export_plugin!`] (a
//! component's exports), [`export_native_plugin!`] (a native plugin's C
//! table), and the metadata both stamp.

/// Registers a plugin type as the crate's export and stamps its metadata.
///
/// `export_plugin!(rubric: MyRubric)`; likewise `rubric_in_place:` (a
/// [`RubricInPlace`](crate::RubricInPlace) on its fast path), `aggregator:`,
/// `curriculum:`, `trigger:`. Use it once per crate.
#[macro_export]
macro_rules! export_plugin {
    ($kind:ident : $plugin:ty) => {
        $crate::export_plugin!(@stamped $crate::API_VERSION, $kind: $plugin);
    };
    // Stamps another contract version; only for the host's compatibility tests.
    (@stamped $api:expr, rubric: $plugin:ty) => {
        $crate::export_plugin!(@rubric $api, $plugin, judge_packed);
    };
    // The fast path: `judge-packed` reads in place and writes in place.
    (@stamped $api:expr, rubric_in_place: $plugin:ty) => {
        $crate::export_plugin!(@rubric $api, $plugin, judge_packed_in_place);
    };
    (@rubric $api:expr, $plugin:ty, $packed:ident) => {
        $crate::export_plugin!(@component $api, "rubric", rubric, export_rubric_world, {
            fn describe() -> $crate::RubricInfo {
                <$plugin as $crate::Rubric>::describe()
            }
            fn judge(
                ctx: $crate::Context,
                samples: ::std::vec::Vec<$crate::Sample>,
            ) -> ::std::vec::Vec<::std::result::Result<$crate::Judgment, ::std::string::String>> {
                $crate::__private::judge::<$plugin>(&ctx, &samples)
            }
            fn reads() -> $crate::SampleFields {
                <$plugin as $crate::Rubric>::READS
            }
            fn judge_packed(ctx: $crate::Context, samples: ::std::vec::Vec<u8>) -> ::std::vec::Vec<u8> {
                $crate::__private::$packed::<$plugin>(ctx, &samples)
            }
        });
    };
    (@stamped $api:expr, aggregator: $plugin:ty) => {
        $crate::export_plugin!(@component $api, "aggregator", aggregator, export_aggregator_world, {
            fn aggregate(
                ctx: $crate::Context,
                items: ::std::vec::Vec<$crate::Scoring>,
            ) -> ::std::vec::Vec<::std::result::Result<::std::option::Option<f64>, ::std::string::String>> {
                $crate::__private::aggregate::<$plugin>(ctx, items)
            }
            fn aggregate_packed(ctx: $crate::Context, items: ::std::vec::Vec<u8>) -> ::std::vec::Vec<u8> {
                $crate::__private::aggregate_packed::<$plugin>(ctx, &items)
            }
        });
    };
    (@stamped $api:expr, curriculum: $plugin:ty) => {
        $crate::export_plugin!(@component $api, "curriculum", curriculum, export_curriculum_world, {
            fn select(
                ctx: $crate::Context,
                candidates: ::std::vec::Vec<$crate::Candidate>,
            ) -> ::std::result::Result<::std::vec::Vec<$crate::CurriculumDecision>, ::std::string::String> {
                $crate::__private::select::<$plugin>(ctx, candidates)
            }
        });
    };
    (@stamped $api:expr, trigger: $plugin:ty) => {
        $crate::export_plugin!(@component $api, "trigger", trigger, export_trigger_world, {
            fn check(
                ctx: $crate::Context,
                history: ::std::vec::Vec<$crate::MonitorPoint>,
            ) -> ::std::result::Result<$crate::TriggerDecision, ::std::string::String> {
                $crate::__private::check::<$plugin>(ctx, history)
            }
        });
    };
    // What every kind's export is: the metadata stamp, and the world's
    // `Guest` implemented by the functions above and exported. Exports
    // exist only in the component; a native build (unit tests, benchmarks)
    // links the plugin as an ordinary library.
    (@component $api:expr, $kind:literal, $world:ident, $export_world:ident, { $($functions:tt)* }) => {
        $crate::__stamp_metadata!($api, $kind);
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __VerifineExport;
            impl $crate::__private::$world::Guest for __VerifineExport {
                $($functions)*
            }
            $crate::__private::$world::$export_world!(
                __VerifineExport with_types_in $crate::__private::$world
            );
        };
    };
}

/// Exports a plugin type as a native plugin: a C-ABI table, stamped with the
/// contract version, that the host checks before calling anything.
///
/// `export_native_plugin!(rubric: MyRubric)`; likewise `aggregator:`,
/// `curriculum:`, `trigger:`. Put it next to [`export_plugin!`]: it expands
/// to nothing on wasm32, so one crate builds as a component for
/// `wasm32-wasip2` and as a native `cdylib` for the host target.
///
/// Native plugins are **not sandboxed**: they run in the host's process with
/// its privileges and no memory or time limit, so hosts load them only on an
/// explicit opt-in. The exported symbol is unmangled, so link at most one
/// plugin that uses this macro into any one native binary.
#[macro_export]
macro_rules! export_native_plugin {
    ($kind:ident : $plugin:ty) => {
        $crate::export_native_plugin!(@stamped $crate::API_VERSION, $kind: $plugin);
    };
    // Stamps another contract version; only for the host's compatibility tests.
    (@stamped $api:expr, $kind:ident : $plugin:ty) => {
        #[cfg(not(target_arch = "wasm32"))]
        const _: () = {
            unsafe extern "C" fn __verifine_native_call(
                function: u32,
                input: *const u8,
                input_len: usize,
                output: *mut $crate::native::NativeBuffer,
            ) -> i32 {
                // SAFETY: the host upholds the ABI's pointer contract.
                unsafe {
                    $crate::native::call(
                        function,
                        input,
                        input_len,
                        output,
                        $crate::native::$kind::<$plugin>,
                    )
                }
            }
            static __VERIFINE_NATIVE_TABLE: $crate::native::NativePluginV0 =
                $crate::native::table(
                    $api,
                    $crate::native::kind::$kind,
                    concat!(env!("CARGO_PKG_NAME"), "\0"),
                    concat!(env!("CARGO_PKG_VERSION"), "\0"),
                    __verifine_native_call,
                );
            /// The native plugin's table (see `verifine_native_abi::SYMBOL`).
            #[unsafe(no_mangle)]
            pub extern "C" fn verifine_native_plugin_v0() -> *const $crate::native::NativePluginV0 {
                &__VERIFINE_NATIVE_TABLE
            }
        };
    };
}

/// Writes the metadata custom section (`key=value` lines) into the module.
#[doc(hidden)]
#[macro_export]
macro_rules! __stamp_metadata {
    ($api:expr, $kind:literal) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            const PARTS: &[&str] = &[
                "api-version=",
                $api,
                "\nkind=",
                $kind,
                "\nname=",
                env!("CARGO_PKG_NAME"),
                "\nversion=",
                env!("CARGO_PKG_VERSION"),
                "\n",
            ];
            const LEN: usize = $crate::__private::joined_len(PARTS);
            #[used]
            #[unsafe(link_section = "verifine-plugin")]
            static METADATA: [u8; LEN] = $crate::__private::join::<LEN>(PARTS);
        };
    };
}

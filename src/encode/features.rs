//! The reference's feature switches and how `--btf_features` and the legacy
//! flags set them (applied left to right; the first `--btf_features` resets
//! every switch to "off").

/// Every name `--btf_features` accepts under the `next` reference
/// (dwarves 1436daf), in its order: v1.31's, then two more.
pub const FEATURE_NAMES_NEXT: &[&str] = &[
    "encode_force",
    "var",
    "float",
    "decl_tag",
    "type_tag",
    "enum64",
    "optimized_func",
    "consistent_func",
    "decl_tag_kfuncs",
    "reproducible_build",
    "distilled_base",
    "global_var",
    "attributes",
    "true_signature",
    "layout",
];

/// Every name `--btf_features` accepts in v1.31, in its order.
pub const FEATURE_NAMES: &[&str] = FEATURE_NAMES_NEXT.split_at(FEATURE_NAMES_NEXT.len() - 2).0;

/// The features of the kernel's own build (6.12's scripts/Makefile.btf)
/// and of the corpus's `kernel` profile: what `btfkit kernel` asks for
/// unless told otherwise.
pub const KERNEL_BUILD_FEATURES: &str =
    "encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build";
/// The languages the kernel's build leaves out.
pub const KERNEL_LANG_EXCLUDE: &str = "rust";

/// Which pahole's output btfkit reproduces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reference {
    /// pahole v1.31 with libbpf 374f7807: the corpus's reference, byte for
    /// byte, and the default.
    #[default]
    V1_31,
    /// dwarves master at 1436daf (July 2026) with libbpf v1.8.0, recorded
    /// as hashes in `tests/next/manifest.tsv`: every blob has the 32-byte
    /// header of BTF 2026, and `layout`/`true_signature` exist.
    Next,
}

impl Reference {
    /// The feature names its `--supported_btf_features` lists.
    pub fn feature_names(self) -> &'static [&'static str] {
        match self {
            Reference::V1_31 => FEATURE_NAMES,
            Reference::Next => FEATURE_NAMES_NEXT,
        }
    }

    /// The on-disk format of an output: libbpf v1.8.0 writes the 32-byte
    /// header always, and the layout section only for standalone BTF
    /// (split BTF relies on its base's).
    pub fn format(self, f: &Features, split: bool) -> crate::btf::Format {
        match self {
            Reference::V1_31 => crate::btf::Format::original(),
            Reference::Next => crate::btf::Format::btf_2026(f.layout && !split),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    pub encode_force: bool,
    pub var: bool,
    pub float: bool,
    pub decl_tag: bool,
    pub type_tag: bool,
    pub enum64: bool,
    pub optimized_func: bool,
    pub consistent_func: bool,
    pub decl_tag_kfuncs: bool,
    pub reproducible_build: bool,
    pub distilled_base: bool,
    pub global_var: bool,
    pub attributes: bool,
    /// `next` only: functions whose compiled signature differs from the
    /// source's are encoded with the compiled one.
    pub true_signature: bool,
    /// `next` only: standalone output carries BTF 2026's layout section.
    pub layout: bool,
    /// Whether a `--btf_features` option already reset the switches.
    reset_done: bool,
}

impl Default for Features {
    /// Plain `-J`: var, decl_tag, type_tag and enum64 on.
    fn default() -> Self {
        Features {
            encode_force: false,
            var: true,
            float: false,
            decl_tag: true,
            type_tag: true,
            enum64: true,
            optimized_func: false,
            consistent_func: false,
            decl_tag_kfuncs: false,
            reproducible_build: false,
            distilled_base: false,
            global_var: false,
            attributes: false,
            true_signature: false,
            layout: false,
            reset_done: false,
        }
    }
}

impl Features {
    fn reset_once(&mut self) {
        if !self.reset_done {
            *self = Features {
                encode_force: false,
                var: false,
                float: false,
                decl_tag: false,
                type_tag: false,
                enum64: false,
                optimized_func: false,
                consistent_func: false,
                decl_tag_kfuncs: false,
                reproducible_build: false,
                distilled_base: false,
                global_var: false,
                attributes: false,
                true_signature: false,
                layout: false,
                reset_done: true,
            };
        }
    }

    fn enable_defaults(&mut self) {
        self.encode_force = true;
        self.var = true;
        self.float = true;
        self.decl_tag = true;
        self.type_tag = true;
        self.enum64 = true;
        self.optimized_func = true;
        self.consistent_func = true;
        self.decl_tag_kfuncs = true;
    }

    /// Whether a feature only the `next` reference has is on.
    pub fn names_next_only(&self) -> bool {
        self.true_signature || self.layout
    }

    /// The names of the features switched on, in [`FEATURE_NAMES_NEXT`] order
    /// (a canonical spelling of the set: `apply_list` of their join gives it back).
    pub fn enabled_names(&self) -> Vec<&'static str> {
        let on = [
            self.encode_force,
            self.var,
            self.float,
            self.decl_tag,
            self.type_tag,
            self.enum64,
            self.optimized_func,
            self.consistent_func,
            self.decl_tag_kfuncs,
            self.reproducible_build,
            self.distilled_base,
            self.global_var,
            self.attributes,
            self.true_signature,
            self.layout,
        ];
        FEATURE_NAMES_NEXT
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(n, _)| *n)
            .collect()
    }

    /// Enables one feature by name; false if the name is unknown.
    pub fn enable(&mut self, name: &str) -> bool {
        match name {
            "default" => self.enable_defaults(),
            "encode_force" => self.encode_force = true,
            "var" => self.var = true,
            "float" => self.float = true,
            "decl_tag" => self.decl_tag = true,
            "type_tag" => self.type_tag = true,
            "enum64" => self.enum64 = true,
            "optimized_func" => self.optimized_func = true,
            "consistent_func" => self.consistent_func = true,
            "decl_tag_kfuncs" => self.decl_tag_kfuncs = true,
            "reproducible_build" => self.reproducible_build = true,
            "distilled_base" => self.distilled_base = true,
            "global_var" => self.global_var = true,
            "attributes" => self.attributes = true,
            "true_signature" => self.true_signature = true,
            "layout" => self.layout = true,
            _ => return false,
        }
        true
    }

    /// Applies one `--btf_features` value. Returns the unknown names (the
    /// reference ignores them unless strict).
    pub fn apply_list(&mut self, value: &str) -> Vec<String> {
        self.reset_once();
        if value == "default" {
            self.enable_defaults();
            return Vec::new();
        }
        let mut list = value;
        if let Some(rest) = value.strip_prefix('+') {
            self.enable_defaults();
            list = rest;
        }
        // The reference copies the value into a 1024-byte buffer.
        let list = if list.len() > 1023 {
            &list[..floor_char_boundary(list, 1023)]
        } else {
            list
        };
        let mut unknown = Vec::new();
        for name in list.split(',') {
            if name.is_empty() {
                continue;
            }
            if !self.enable(name) {
                unknown.push(name.to_string());
            }
        }
        unknown
    }

    /// `--btf_gen_all`: like `--btf_features=all`, which is not a feature
    /// name, so everything ends up off.
    pub fn gen_all(&mut self) {
        self.reset_once();
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_j_defaults() {
        let f = Features::default();
        assert!(f.var && f.decl_tag && f.type_tag && f.enum64 && !f.float && !f.global_var);
    }

    #[test]
    fn first_list_resets_then_accumulates() {
        let mut f = Features::default();
        f.apply_list("float");
        assert!(f.float && !f.enum64 && !f.var && !f.type_tag);
        f.apply_list("var");
        assert!(f.float && f.var);
    }

    #[test]
    fn plus_and_default_enable_defaults() {
        let mut f = Features::default();
        let unknown = f.apply_list("+reproducible_build,global_var,bogus");
        assert_eq!(unknown, vec!["bogus".to_string()]);
        assert!(f.float && f.enum64 && f.consistent_func && f.global_var && f.reproducible_build && !f.attributes);
        let mut g = Features::default();
        g.apply_list("default");
        assert!(g.float && g.decl_tag_kfuncs && !g.global_var);
        let mut h = Features::default();
        h.apply_list("var,+x");
        assert!(h.var && !h.float);
    }

    #[test]
    fn gen_all_turns_everything_off() {
        let mut f = Features::default();
        f.gen_all();
        assert!(!f.var && !f.enum64 && !f.decl_tag && !f.type_tag);
    }
}

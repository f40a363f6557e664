//! Language names for `--lang` / `--lang_exclude`: each names exactly one
//! DW_LANG code, as in the reference.

const LANGS: &[(&str, u16)] = &[
    ("c89", 0x1),
    ("c", 0x2),
    ("ada83", 0x3),
    ("c++", 0x4),
    ("cobol74", 0x5),
    ("cobol85", 0x6),
    ("fortran77", 0x7),
    ("fortran90", 0x8),
    ("pascal83", 0x9),
    ("modula2", 0xa),
    ("java", 0xb),
    ("c99", 0xc),
    ("ada95", 0xd),
    ("fortran95", 0xe),
    ("pli", 0xf),
    ("objc", 0x10),
    ("objc++", 0x11),
    ("upc", 0x12),
    ("d", 0x13),
    ("python", 0x14),
    ("opencl", 0x15),
    ("go", 0x16),
    ("modula3", 0x17),
    ("haskell", 0x18),
    ("c++03", 0x19),
    ("c++11", 0x1a),
    ("ocaml", 0x1b),
    ("rust", 0x1c),
    ("c11", 0x1d),
    ("swift", 0x1e),
    ("julia", 0x1f),
    ("dylan", 0x20),
    ("c++14", 0x21),
    ("fortran03", 0x22),
    ("fortran08", 0x23),
    ("renderscript", 0x24),
    ("bliss", 0x25),
    ("asm", 0x8001),
];

pub const DW_LANG_RUST: u16 = 0x1c;

/// Parses a comma-separated list of language names (case-insensitive).
pub fn parse_list(s: &str) -> Result<Vec<u16>, String> {
    s.split(',')
        .filter(|n| !n.is_empty())
        .map(|n| {
            LANGS
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(n))
                .map(|&(_, code)| code)
                .ok_or_else(|| format!("unknown language name `{n}`"))
        })
        .collect()
}

/// Which CUs survive the language filters.
#[derive(Clone, Debug, Default)]
pub enum LangFilter {
    #[default]
    All,
    Only(Vec<u16>),
    Exclude(Vec<u16>),
}

impl LangFilter {
    pub fn keeps(&self, lang: u16) -> bool {
        match self {
            LangFilter::All => true,
            LangFilter::Only(l) => l.contains(&lang),
            LangFilter::Exclude(l) => !l.contains(&lang),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_one_code() {
        assert_eq!(parse_list("rust,C++,c++14").unwrap(), vec![0x1c, 0x4, 0x21]);
        assert!(parse_list("klingon").is_err());
        let f = LangFilter::Exclude(vec![0x1c]);
        assert!(f.keeps(0x1d) && !f.keeps(0x1c));
    }
}

use super::*;
use gimli::write::{self, AttributeValue as W, EndianVec, LineProgram, Sections};

/// Every read attribute of every DIE, as `Dies` gives it and as gimli's
/// own parser gives it, for a unit with one DIE per value form.
#[test]
fn values_match_gimli_form_by_form() {
    for format in [Format::Dwarf32, Format::Dwarf64] {
        for version in [2u16, 3, 4, 5] {
            let encoding = gimli::Encoding {
                format,
                version,
                address_size: 8,
            };
            let mut dw = write::Dwarf::new();
            let id = dw.units.add(write::Unit::new(encoding, LineProgram::none()));
            let unit = dw.units.get_mut(id);
            let root = unit.root();
            let first = unit.add(root, gimli::DW_TAG_base_type);
            let strp = dw.strings.add("strp name");
            let unit = dw.units.get_mut(id);
            let values = [
                W::Data1(7),
                W::Data2(0x1234),
                W::Data4(0x1234_5678),
                W::Data8(0x1234_5678_9abc_def0),
                W::Sdata(-5),
                W::Udata(300),
                W::Block(vec![1, 2, 3]),
                W::Flag(true),
                W::FlagPresent,
                W::UnitRef(first),
                W::String(b"inline".to_vec()),
                W::StringRef(strp),
                W::Exprloc(write::Expression::raw(vec![0x23, 0x10])),
            ];
            for v in values {
                let die = unit.add(root, gimli::DW_TAG_variable);
                let e = unit.get_mut(die);
                e.set(gimli::DW_AT_decl_line, W::Udata(9));
                e.set(gimli::DW_AT_const_value, v.clone());
                e.set(gimli::DW_AT_location, v.clone());
                e.set(gimli::DW_AT_name, W::String(b"n".to_vec()));
                e.set(gimli::DW_AT_byte_size, W::Data1(4));
                e.set(gimli::DW_AT_decl_file, W::Data2(3));
                e.set(gimli::DW_AT_type, W::UnitRef(first));
            }
            let mut sections = Sections::new(EndianVec::new(gimli::LittleEndian));
            dw.write(&mut sections).unwrap();
            fn r(v: &EndianVec<gimli::LittleEndian>) -> R<'_> {
                EndianSlice::new(v.slice(), RunTimeEndian::Little)
            }
            let d = gimli::Dwarf {
                debug_info: gimli::DebugInfo::from(r(&sections.debug_info)),
                debug_abbrev: gimli::DebugAbbrev::from(r(&sections.debug_abbrev)),
                ..Default::default()
            };
            let header = d.units().next().unwrap().unwrap();
            let unit = d.unit(header).unwrap();

            let mut ours = Vec::new();
            let mut dies = Dies::new(&unit.header, *gimli::Section::reader(&d.debug_abbrev)).unwrap();
            while !dies.is_empty() {
                let off = dies.next_offset();
                let Some(a) = dies.abbrev().unwrap() else {
                    continue;
                };
                if dies.read(a, |f, v| ours.push((off, f, v.raw()))).is_err() {
                    panic!("read failed at {off:#x}");
                }
            }
            let mut theirs = Vec::new();
            let mut raw = unit.entries_raw(None).unwrap();
            while !raw.is_empty() {
                let off = raw.next_offset().0 as u64;
                let Some(a) = raw.read_abbreviation().unwrap() else {
                    continue;
                };
                for spec in a.attributes() {
                    let at = raw.read_attribute(*spec).unwrap();
                    if let Some(f) = Field::of(at.name()) {
                        let v = match (f, at.raw_value()) {
                            // a constant read as a plain number
                            (Field::ByteSize, AttributeValue::Data1(x)) => AttributeValue::Udata(x as u64),
                            (_, v) => v,
                        };
                        theirs.push((off, f, v));
                    }
                }
            }
            assert_eq!(ours.len(), theirs.len(), "{format:?} v{version}");
            for (a, b) in ours.iter().zip(&theirs) {
                assert_eq!(a, b, "{format:?} v{version}");
            }
        }
    }
}

#[test]
fn sparse_abbreviation_codes_are_compiled_once() {
    // code 1: compile_unit with children; code 70000: base_type, name as
    // an inline string, byte_size as data1
    let abbrev: &[u8] = &[
        1, 0x11, 1, 0, 0, //
        0xf0, 0xa2, 0x04, 0x24, 0, 0x03, 0x08, 0x0b, 0x0b, 0, 0, //
        0,
    ];
    let dies: &[u8] = &[
        1, 0xf0, 0xa2, 0x04, b'i', b'n', b't', 0, 4, 0xf0, 0xa2, 0x04, b'l', 0, 8, 0,
    ];
    let mut info = Vec::new();
    info.extend_from_slice(&((7 + dies.len()) as u32).to_le_bytes());
    info.extend_from_slice(&4u16.to_le_bytes());
    info.extend_from_slice(&0u32.to_le_bytes());
    info.push(8);
    info.extend_from_slice(dies);
    let d = gimli::Dwarf {
        debug_info: gimli::DebugInfo::from(EndianSlice::new(&info, RunTimeEndian::Little)),
        debug_abbrev: gimli::DebugAbbrev::from(EndianSlice::new(abbrev, RunTimeEndian::Little)),
        ..Default::default()
    };
    let header = d.units().next().unwrap().unwrap();
    let unit = d.unit(header).unwrap();
    let mut c = Dies::new(&unit.header, *gimli::Section::reader(&d.debug_abbrev)).unwrap();
    let mut got = Vec::new();
    while !c.is_empty() {
        let Some(a) = c.abbrev().unwrap() else {
            continue;
        };
        let mut name = Vec::new();
        let mut size = None;
        if c.read(a, |f, v| match (f, v) {
            (Field::Name, Value::Other(AttributeValue::String(s))) => name = s.slice().to_vec(),
            (Field::ByteSize, Value::Const(x)) => size = Some(x),
            _ => {}
        })
        .is_err()
        {
            panic!("read failed");
        }
        got.push((a.tag, name, size));
    }
    assert_eq!(
        got,
        [
            (gimli::DW_TAG_compile_unit, vec![], None),
            (gimli::DW_TAG_base_type, b"int".to_vec(), Some(4)),
            (gimli::DW_TAG_base_type, b"l".to_vec(), Some(8)),
        ]
    );
    assert_eq!(c.compiled.len(), 2);
    assert_eq!(c.depth, 0);
}

/// A cursor over `data` whose abbreviations are `table`.
fn cursor<'a>(data: &'a [u8], table: &'a [u8]) -> Dies<'a> {
    Dies {
        data,
        pos: 0,
        base: 11,
        depth: 0,
        endian: RunTimeEndian::Little,
        enc: gimli::Encoding {
            format: Format::Dwarf32,
            version: 4,
            address_size: 8,
        },
        abbrev: EndianSlice::new(table, RunTimeEndian::Little),
        abbrev_done: false,
        specs: Vec::new(),
        by_code: Vec::new(),
        sparse: hashbrown::HashMap::new(),
        compiled: Vec::new(),
        ops: Vec::new(),
        cross_unit: false,
    }
}

#[test]
fn abbreviations_are_read_as_far_as_the_dies_need() {
    // 1: base_type, name (string); 2: base_type, byte_size (data1);
    // then an entry with tag 0, which only a DIE using code 3 reaches
    let table = [
        1, 0x24, 0, 0x03, 0x08, 0, 0, 2, 0x24, 1, 0x0b, 0x0b, 0, 0, 3, 0, 0, 0, 0,
    ];
    // a DIE of code 2 (byte_size 4), then one of code 1 ("a")
    let dies = [2, 4, 1, b'a', 0];
    let mut c = cursor(&dies, &table);
    let a = c.abbrev().unwrap().unwrap();
    assert!(a.has_children && a.tag == gimli::DW_TAG_base_type);
    let mut got = Vec::new();
    c.read(a, |f, v| got.push((f, v.raw()))).ok().unwrap();
    let a = c.abbrev().unwrap().unwrap();
    assert!(!a.has_children);
    c.read(a, |f, v| got.push((f, v.raw()))).ok().unwrap();
    assert_eq!(
        got,
        [
            (Field::ByteSize, AttributeValue::Udata(4)),
            (
                Field::Name,
                AttributeValue::String(EndianSlice::new(b"a", RunTimeEndian::Little))
            )
        ]
    );
    // both compiled by the first look-up; the bad entry never read
    assert_eq!((c.compiled.len(), c.abbrev_done), (2, false));
    let mut c = cursor(&[3], &table);
    assert!(matches!(c.abbrev(), Err(gimli::Error::AbbreviationTagZero)));
    // a code past the table's end, and a code defined twice on the way
    let mut c = cursor(&[9], &table[..14]);
    assert!(matches!(c.abbrev(), Err(gimli::Error::InvalidAbbreviationCode(9))));
    assert!(c.abbrev_done);
    let twice = [1, 0x24, 0, 0, 0, 1, 0x24, 0, 0, 0, 2, 0x24, 0, 0, 0];
    let mut c = cursor(&[2], &twice);
    assert!(matches!(c.abbrev(), Err(gimli::Error::DuplicateAbbreviationCode(1))));
    let mut c = cursor(&[1], &[1, 0x24, 2, 0, 0]);
    assert!(matches!(c.abbrev(), Err(gimli::Error::InvalidAbbreviationChildren(_))));
    let mut c = cursor(&[1], &[1, 0x24, 0, 0x03, 0, 0, 0]);
    assert!(matches!(c.abbrev(), Err(gimli::Error::AttributeFormZero)));
}

#[test]
fn truncated_input_is_an_error() {
    let mut d = cursor(&[0x80, 0x80], &[]);
    assert!(matches!(d.uleb(), Err(gimli::Error::UnexpectedEof(_))));
    d.pos = 0;
    d.data = &[0x05];
    assert!(matches!(d.abbrev(), Err(gimli::Error::InvalidAbbreviationCode(5))));
    d.pos = 0;
    d.data = &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
    assert!(matches!(d.uleb(), Err(gimli::Error::BadUnsignedLeb128)));
    d.pos = 0;
    assert_eq!(d.sleb().unwrap(), -1);
    d.pos = 0;
    d.data = b"abc";
    assert!(matches!(
        d.skip_form(dw::DW_FORM_string),
        Err(gimli::Error::UnexpectedEof(_))
    ));
    assert!(matches!(d.split(4), Err(gimli::Error::UnexpectedEof(_))));
}

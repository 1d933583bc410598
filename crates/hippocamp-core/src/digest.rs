//! SHA-256 digests with a lowercase hex text form.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::Error;

/// A SHA-256 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest([u8; 32]);

impl Sha256Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// Wraps raw digest bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The raw digest bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The lowercase hex text, written into `buf` (on the caller's stack:
    /// every reply shows digests, and a string each was an allocation).
    pub fn hex<'b>(&self, buf: &'b mut [u8; 64]) -> &'b str {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for (pair, b) in buf.chunks_exact_mut(2).zip(self.0) {
            pair[0] = HEX[usize::from(b >> 4)];
            pair[1] = HEX[usize::from(b & 0xf)];
        }
        // Hex digits only.
        std::str::from_utf8(buf).unwrap_or_default()
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.hex(&mut [0u8; 64]))
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256Digest({self})")
    }
}

/// A malformed digest read back from storage is corruption, not bad input.
impl FromStr for Sha256Digest {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let mut bytes = [0u8; 32];
        if s.len() != 64 || s.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(Error::Corrupt(format!("malformed SHA-256 digest {s:?}")));
        }
        hex::decode_to_slice(s, &mut bytes)
            .map_err(|_| Error::Corrupt(format!("malformed SHA-256 digest {s:?}")))?;
        Ok(Self(bytes))
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.hex(&mut [0u8; 64]))
    }
}

impl schemars::JsonSchema for Sha256Digest {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Sha256Digest".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9a-f]{64}$",
            "description": "SHA-256, lowercase hex",
        })
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector() {
        assert_eq!(
            Sha256Digest::of(b"abc").to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let d = Sha256Digest::of(b"abc");
        assert_eq!(d.to_string().parse::<Sha256Digest>().unwrap(), d);
        assert!("xyz".parse::<Sha256Digest>().is_err());
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            format!("\"{}\"", hex::encode(d.as_bytes()))
        );
        for b in 0..=255u8 {
            let d = Sha256Digest::from_bytes([b; 32]);
            assert_eq!(d.to_string(), hex::encode(d.as_bytes()));
        }
    }
}

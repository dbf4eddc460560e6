//! A weight matrix repacked for integer products: 16 output rows by one
//! 32-value block per [`Tile`], the 16 rows' bytes interleaved four at a
//! time, so one AVX-512 VNNI instruction multiplies four inputs into all 16
//! outputs. Tiles of one column stripe (16 outputs) follow each other over
//! the input's blocks.

use super::blocks::{BLOCK, BlockFormat};

/// Outputs per tile.
pub const TILE_OUTPUTS: usize = 16;
/// Inputs one VNNI lane multiplies at once.
pub const GROUP: usize = 4;

/// 16 outputs × 32 inputs: `value = scale[o] · q + offset[o]`, 640 bytes.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub struct Tile {
    /// `q[g·64 + o·4 + j]` is output `o`'s value for input `4g + j`.
    pub q: [u8; BLOCK * TILE_OUTPUTS],
    pub scale: [f32; TILE_OUTPUTS],
    pub offset: [f32; TILE_OUTPUTS],
}

impl Tile {
    const EMPTY: Tile = Tile {
        q: [0; BLOCK * TILE_OUTPUTS],
        scale: [0.0; TILE_OUTPUTS],
        offset: [0.0; TILE_OUTPUTS],
    };
}

/// A matrix `[outputs, inputs]` as tiles: stripe `s`, block `b` at
/// `s · blocks + b`. Outputs past the last real one are zero.
pub struct TiledMatrix {
    pub outputs: usize,
    pub inputs: usize,
    pub tiles: Vec<Tile>,
}

impl TiledMatrix {
    /// Repacks `raw`, the file's bytes of an `[outputs, inputs]` matrix in
    /// `format` (row-major, `inputs / 32` blocks a row).
    pub fn pack(
        format: BlockFormat,
        outputs: usize,
        inputs: usize,
        raw: &[u8],
    ) -> Result<Self, String> {
        let per_block = format.values();
        if inputs == 0 || !inputs.is_multiple_of(per_block) {
            return Err(format!(
                "{inputs} inputs are not whole blocks of {per_block} ({format:?})"
            ));
        }
        let blocks = inputs / BLOCK;
        let row_bytes = inputs / per_block * format.bytes();
        if raw.len() != outputs * row_bytes {
            return Err(format!(
                "{} bytes for {outputs} × {inputs} values in {format:?} (expected {})",
                raw.len(),
                outputs * row_bytes
            ));
        }
        let stripes = outputs.div_ceil(TILE_OUTPUTS);
        let mut tiles = vec![Tile::EMPTY; stripes * blocks];
        for (row, bytes) in raw.chunks_exact(row_bytes).enumerate() {
            let (stripe, o) = (row / TILE_OUTPUTS, row % TILE_OUTPUTS);
            let mut b = 0;
            for block in bytes.chunks_exact(format.bytes()) {
                format.unpack(block, |unpacked| {
                    let tile = &mut tiles[stripe * blocks + b];
                    tile.scale[o] = unpacked.scale;
                    tile.offset[o] = unpacked.offset;
                    for (i, &q) in unpacked.q.iter().enumerate() {
                        let (g, j) = (i / GROUP, i % GROUP);
                        tile.q[g * GROUP * TILE_OUTPUTS + o * GROUP + j] = q;
                    }
                    b += 1;
                });
            }
        }
        Ok(TiledMatrix {
            outputs,
            inputs,
            tiles,
        })
    }

    /// Blocks of 32 inputs.
    pub fn blocks(&self) -> usize {
        self.inputs / BLOCK
    }

    /// Stripes of 16 outputs.
    pub fn stripes(&self) -> usize {
        self.outputs.div_ceil(TILE_OUTPUTS)
    }

    /// The tiles of stripe `s`, one per block of inputs.
    pub fn stripe(&self, s: usize) -> &[Tile] {
        &self.tiles[s * self.blocks()..(s + 1) * self.blocks()]
    }

    /// The weight of `output` for `input`, for tests.
    #[cfg(test)]
    pub fn value(&self, output: usize, input: usize) -> f32 {
        let tile = &self.stripe(output / TILE_OUTPUTS)[input / BLOCK];
        let (o, i) = (output % TILE_OUTPUTS, input % BLOCK);
        let q = tile.q[(i / GROUP) * GROUP * TILE_OUTPUTS + o * GROUP + i % GROUP];
        tile.scale[o] * f32::from(q) + tile.offset[o]
    }
}

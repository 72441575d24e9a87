/* interleave.c: the x16 weight layout (kernels.h) written from a matrix's rows. Portable: the
 * model's background thread runs it once per matrix, while decode still reads the rows. */
#include <string.h>

#include "kernels/kernels_impl.h"

size_t syn_x16_codes_bytes(int64_t n_groups, int64_t n_blocks) {
    return (size_t)n_groups * (size_t)n_blocks * SYN_X16_ROWS * QK8_0;
}

size_t syn_x16_scales_bytes(int64_t n_groups, int64_t n_blocks) {
    return (size_t)n_groups * (size_t)n_blocks * SYN_X16_ROWS * sizeof(uint16_t);
}

void syn_pack_q8_0_x16(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t g0, int64_t g1,
                       uint8_t *codes, uint16_t *scales) {
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *gc = codes + syn_x16_codes_bytes(g, n_blocks);
        uint16_t *gs = scales + (size_t)g * (size_t)n_blocks * SYN_X16_ROWS;
        for (int i = 0; i < SYN_X16_ROWS; i++) {
            const block_q8_0 *row = syn_k_wrow(w, w_row_bytes, g * SYN_X16_ROWS + i);
            for (int64_t k = 0; k < n_blocks; k++) {
                uint8_t *dst = gc + ((size_t)k * 8 * SYN_X16_ROWS + (size_t)i) * 4;
                for (int j = 0; j < 8; j++) { /* dword j of the block: codes 4j..4j+3, + 128 */
                    uint32_t v;
                    memcpy(&v, row[k].qs + 4 * j, sizeof v);
                    v ^= 0x80808080u;
                    memcpy(dst + (size_t)j * SYN_X16_ROWS * 4, &v, sizeof v);
                }
                gs[k * SYN_X16_ROWS + i] = row[k].d;
            }
        }
    }
}

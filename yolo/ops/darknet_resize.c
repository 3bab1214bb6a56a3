/* Darknet's load_image conversion (byte / 255.) and resize_image (src/image.c) of one uint8 H x W x 3 image into
   float32 h x w x 3 RGB, in one pass over the output: the CPU path of yolo/ops/darknet_resize.py, whose tables
   (source rows and columns, float32 weights, Darknet's edge cases as weights 1 and 0) it is given. Every float
   operation is Darknet's, in its order, each rounded to float: built with -ffp-contract=off (no fused
   multiply-add) and without -ffast-math. Loaded by yolo/ops/darknet_resize_kernel.py. */
#include <stddef.h>
#include <stdint.h>

/* Pass 1 on source row `row` (pixel p, channel k at row[p * pixel_step + k * channel_step]): the output columns
   (1 - dx) * left + dx * right, written as w * 3 floats. */
static inline __attribute__((always_inline)) void blend_columns(
    const uint8_t *row, ptrdiff_t pixel_step, ptrdiff_t channel_step, int w, const int64_t *cols,
    const float *col_weights, const float *level, float *part)
{
    for (int c = 0; c < w; ++c) {
        const uint8_t *left = row + cols[c] * pixel_step, *right = row + cols[w + c] * pixel_step;
        float near = col_weights[c], far = col_weights[w + c];
        for (int k = 0; k < 3; ++k) {
            float a = near * level[left[k * channel_step]];
            float b = far * level[right[k * channel_step]];
            part[c * 3 + k] = a + b;
        }
    }
}

/* blend_columns for the usual layouts (contiguous pixels, BGR or RGB), with the steps known to the compiler. */
static void blend_columns_of(const uint8_t *row, ptrdiff_t pixel_step, ptrdiff_t channel_step, int w,
                             const int64_t *cols, const float *col_weights, const float *level, float *part)
{
    if (pixel_step == 3 && channel_step == -1)
        blend_columns(row, 3, -1, w, cols, col_weights, level, part);
    else if (pixel_step == 3 && channel_step == 1)
        blend_columns(row, 3, 1, w, cols, col_weights, level, part);
    else
        blend_columns(row, pixel_step, channel_step, w, cols, col_weights, level, part);
}

/* image: the first byte of the first pixel's first output channel (R), with steps in bytes between rows,
   pixels and channels (negative for a view in reverse, such as BGR read as RGB). rows: Int64[2, h] upper and
   lower source rows; row_weights: Float32[2, h]; cols: Int64[2, w]; col_weights: Float32[2, w]. out: h rows of
   w * 3 floats, out_row_step floats apart. scratch: 2 * w * 3 floats, the two source rows pass 1 keeps (the
   output rows read each source row in order, so each is blended once). */
void yolo_darknet_resize(const uint8_t *image, ptrdiff_t row_step, ptrdiff_t pixel_step, ptrdiff_t channel_step,
                         int h, int w, const int64_t *rows, const float *row_weights, const int64_t *cols,
                         const float *col_weights, float *out, ptrdiff_t out_row_step, float *scratch)
{
    float level[256];
    for (int v = 0; v < 256; ++v)
        level[v] = (float)(v / 255.);  /* Darknet: data[...] / 255. in double, stored as float */
    float *kept[2] = {scratch, scratch + (size_t)w * 3};
    int64_t kept_row[2] = {-1, -1};
    for (int r = 0; r < h; ++r) {
        int64_t needed[2] = {rows[r], rows[h + r]};
        float upper_weight = row_weights[r], lower_weight = row_weights[h + r];
        const float *part[2] = {0, 0};
        for (int k = 0; k < 2; ++k) {
            if (k == 1 && lower_weight == 0.0f)
                break;  /* x + 0 * y == x: the last row keeps its upper term only, as in Darknet */
            int slot = kept_row[0] == needed[k] ? 0 : kept_row[1] == needed[k] ? 1 : -1;
            if (slot < 0) {  /* blend the row into the slot the other needed row is not in */
                slot = (k == 1 && part[0] == kept[0]) || (k == 0 && kept_row[0] == needed[1]) ? 1 : 0;
                blend_columns_of(image + needed[k] * row_step, pixel_step, channel_step, w, cols, col_weights, level,
                              kept[slot]);
                kept_row[slot] = needed[k];
            }
            part[k] = kept[slot];
        }
        /* Pass 2: (1 - dy) * upper, then + dy * lower. */
        float *o = out + (ptrdiff_t)r * out_row_step;
        if (part[1]) {
            for (int i = 0; i < w * 3; ++i) {
                float a = upper_weight * part[0][i];
                float b = lower_weight * part[1][i];
                o[i] = a + b;
            }
        } else {
            for (int i = 0; i < w * 3; ++i)
                o[i] = upper_weight * part[0][i];
        }
    }
}

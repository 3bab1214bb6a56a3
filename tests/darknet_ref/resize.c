/* Darknet's image steps of `detector test` / `detector map` (src/image.c), for tests/test_darknet_resize.py:
 *   resize resize    IN H W OUT_W OUT_H OUT   resize_image of the bytes IN
 *   resize letterbox IN H W OUT_W OUT_H OUT   letterbox_image of the bytes IN
 *   resize decode    PATH OUT                 load_image_color(PATH, 0, 0): this build's decode
 * IN: H*W*3 uint8, interleaved RGB (as stb_image decodes), converted as load_image_stb converts them
 * ((float)byte/255.); OUT: C*H*W float32 (planar, Darknet's image layout); decode also prints "W H C". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "darknet.h"

static int write_image(image im, const char *path) {
    FILE *f = fopen(path, "wb");
    size_t n = (size_t)im.w * im.h * im.c;
    if (!f || fwrite(im.data, sizeof(float), n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "decode")) {
        image im = load_image_color(argv[2], 0, 0);
        printf("%d %d %d\n", im.w, im.h, im.c);
        return write_image(im, argv[3]);
    }
    if (argc != 8 || (strcmp(argv[1], "resize") && strcmp(argv[1], "letterbox"))) {
        fprintf(stderr, "usage: resize resize|letterbox IN H W OUT_W OUT_H OUT | resize decode PATH OUT\n");
        return 2;
    }
    int h = atoi(argv[3]), w = atoi(argv[4]), out_w = atoi(argv[5]), out_h = atoi(argv[6]);
    size_t n = (size_t)w * h * 3;
    unsigned char *data = malloc(n);
    FILE *f = fopen(argv[2], "rb");
    if (!data || !f || fread(data, 1, n, f) != n) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    fclose(f);
    image im = make_image(w, h, 3);
    int i, j, k;
    for (k = 0; k < 3; ++k)  /* load_image_stb's loop */
        for (j = 0; j < h; ++j)
            for (i = 0; i < w; ++i)
                im.data[i + w * j + w * h * k] = (float)data[k + 3 * i + 3 * w * j] / 255.;
    image out = strcmp(argv[1], "resize") ? letterbox_image(im, out_w, out_h) : resize_image(im, out_w, out_h);
    int rc = write_image(out, argv[7]);
    free(data);
    free_image(im);
    free_image(out);
    return rc;
}

/* Darknet's letterbox_image (src/image.c) on one float image, for tests/test_letterbox_fill.py.
 *   letterbox IN C H W NET_W NET_H OUT
 * IN: C*H*W float32 (planar, 0..1, Darknet's image layout); OUT: C*NET_H*NET_W float32. */
#include <stdio.h>
#include <stdlib.h>
#include "darknet.h"

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: letterbox IN C H W NET_W NET_H OUT\n");
        return 2;
    }
    int c = atoi(argv[2]), h = atoi(argv[3]), w = atoi(argv[4]), net_w = atoi(argv[5]), net_h = atoi(argv[6]);
    image im = make_image(w, h, c);
    FILE *f = fopen(argv[1], "rb");
    if (!f || fread(im.data, sizeof(float), (size_t)w * h * c, f) != (size_t)w * h * c) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 1;
    }
    fclose(f);
    image boxed = letterbox_image(im, net_w, net_h);
    f = fopen(argv[7], "wb");
    if (!f || fwrite(boxed.data, sizeof(float), (size_t)net_w * net_h * c, f) != (size_t)net_w * net_h * c) {
        fprintf(stderr, "cannot write %s\n", argv[7]);
        return 1;
    }
    fclose(f);
    free_image(im);
    free_image(boxed);
    return 0;
}

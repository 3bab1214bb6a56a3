/* Darknet's own view of a network's heads, for tests/test_mixed_heads.py and tests/test_cfg_list_lengths.py.
 *
 *   head_boxes CFG WEIGHTS|- INPUT|- THRESH
 *
 * Parses CFG (batch 1) and prints, for every [yolo], [Gaussian_yolo] and [region] layer,
 *   "head I TYPE N TOTAL" then "anchors V..." (its l.biases as the parser left them: 2*TOTAL values, [region]
 *   2*N) and "mask M..." ([yolo], [Gaussian_yolo]).
 * With INPUT (float32 C x H x W, RGB 0..1, planar) it runs network_predict and then decodes each [yolo] and
 * [Gaussian_yolo] layer with the layer type's own function (get_yolo_detections / get_gaussian_yolo_detections,
 * boxes relative to the network input, no letterbox), one line per detection:
 *   "det I x y w h objectness uc0 uc1 uc2 uc3 p0 .. pC-1"
 * (uc: the Gaussian uncertainties, 0 for a [yolo] layer; p: Darknet's thresholded class scores). Each layer gets
 * its own detection buffer with room for the uncertainties: get_network_boxes sizes them by the first head only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "darknet.h"
#include "network.h"
#include "parser.h"
#include "yolo_layer.h"
#include "gaussian_yolo_layer.h"

static void print_detections(layer l, int index, int count, detection *dets) {
    int k, j;
    for (k = 0; k < count; ++k) {
        detection d = dets[k];
        printf("det %d %.9g %.9g %.9g %.9g %.9g", index, d.bbox.x, d.bbox.y, d.bbox.w, d.bbox.h, d.objectness);
        for (j = 0; j < 4; ++j) printf(" %.9g", d.uc[j]);
        for (j = 0; j < l.classes; ++j) printf(" %.9g", d.prob[j]);
        printf("\n");
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: head_boxes CFG WEIGHTS|- INPUT|- THRESH\n");
        return 2;
    }
    network net = parse_network_cfg_custom(argv[1], 1, 1);
    if (strcmp(argv[2], "-") != 0) load_weights(&net, argv[2]);
    float thresh = (float)atof(argv[4]);
    int i, j;
    for (i = 0; i < net.n; ++i) {
        layer l = net.layers[i];
        if (l.type != YOLO && l.type != GAUSSIAN_YOLO && l.type != REGION) continue;
        int values = l.type == REGION ? 2 * l.n : 2 * l.total;
        printf("head %d %s %d %d\nanchors", i, get_layer_string(l.type), l.n, l.type == REGION ? l.n : l.total);
        for (j = 0; j < values; ++j) printf(" %.9g", l.biases[j]);
        printf("\n");
        if (l.type != REGION) {
            printf("mask");
            for (j = 0; j < l.n; ++j) printf(" %d", l.mask[j]);
            printf("\n");
        }
    }
    if (strcmp(argv[3], "-") == 0) return 0;
    size_t size = (size_t)net.inputs;
    float *x = (float *)calloc(size, sizeof(float));
    FILE *f = fopen(argv[3], "rb");
    if (!f || fread(x, sizeof(float), size, f) != size) {
        fprintf(stderr, "cannot read %s\n", argv[3]);
        return 1;
    }
    fclose(f);
    network_predict(net, x);
    for (i = 0; i < net.n; ++i) {
        layer l = net.layers[i];
        if (l.type != YOLO && l.type != GAUSSIAN_YOLO) continue;
        int slots = l.w * l.h * l.n;
        detection *dets = (detection *)calloc(slots, sizeof(detection));
        for (j = 0; j < slots; ++j) {
            dets[j].prob = (float *)calloc(l.classes, sizeof(float));
            dets[j].uc = (float *)calloc(4, sizeof(float));
        }
        int count = l.type == YOLO
            ? get_yolo_detections(l, net.w, net.h, net.w, net.h, thresh, 0, 1, dets, 0)
            : get_gaussian_yolo_detections(l, net.w, net.h, net.w, net.h, thresh, 0, 1, dets, 0);
        print_detections(l, i, count, dets);
        for (j = 0; j < slots; ++j) {
            free(dets[j].prob);
            free(dets[j].uc);
        }
        free(dets);
    }
    free(x);
    return 0;
}

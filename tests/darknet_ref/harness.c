/* A small driver around libdarknet for the reference tests (see tests/darknet_ref/__init__.py).
 *
 *   harness forward CFG WEIGHTS N INPUT OUTDIR      inference on a batch of N: every layer's output
 *   harness train   CFG WEIGHTS INPUT TRUTH OUTDIR  train_network_datum once per sub-batch (forward + backward,
 *                                                    no update): every layer's output, delta and parameter
 *                                                    updates, and each layer's cost
 *   harness step    CFG WEIGHTS INPUT TRUTH OUTW    as train, then one update_network; writes the new weights
 *   harness rate    CFG N                            get_current_rate at update numbers 0..N: 'rate R' lines
 *   harness layers  CFG                              parse only (batch 1): one line per layer on stdout,
 *                                                    'index type out_c out_h out_w outputs batch 0 bflops'
 *   harness updates CFG WEIGHTS INPUT TRUTH K OUTDIR
 *                          K rounds on the same data, each train_network_datum per sub-batch then one
 *                          update_network (momentum carries over, *net.seen grows as in training): after
 *                          sub-batch s of round k (before that round's update) the train-mode dump goes to
 *                          OUTDIR/k_s/; 'rate R' per round on stdout; OUTDIR/final.weights after the last update
 *   harness kmeans  K POINTS INIT                    do_kmeans' loop (calc_anchors) from given initial centres:
 *                                                    POINTS holds float32 N x 2 (w, h), INIT int32 K row indices
 *                                                    (Darknet draws them with rand); prints 'iterations I' and
 *                                                    K lines 'center W H' (unsorted, %.9g)
 *   harness augment INPUT W H NETW NETH PLEFT PRIGHT PTOP PBOT FLIP DHUE DSAT DEXP LABELS MAX OUTDIR
 *                                                    load_data_detection's steps with given draws (no OpenCV):
 *                                                    crop_image, resize_image, flip_image, distort_image on
 *                                                    INPUT (float32 3 x H x W, RGB 0..1) -> OUTDIR/image_0.f32;
 *                                                    fill_truth_detection on LABELS (an image path whose .txt
 *                                                    holds the labels) -> OUTDIR/truth_0.f32 (MAX x 6)
 *   harness mixup   N NEW OLD NEWTRUTH OLDTRUTH MAX OUTDIR
 *                                                    load_data_detection's mixup of two augmented images:
 *                                                    blend_images(NEW, 0.5, OLD, 0.5) on N floats ->
 *                                                    OUTDIR/image_0.f32; blend_truth on MAX x 6 truth rows
 *                                                    -> OUTDIR/truth_0.f32
 *
 *   harness sequence CFG WEIGHTS N T CALLS TRAIN INPUT OUTDIR
 *                          CALLS forward passes, each over the next N images of INPUT (N = T time steps x N/T
 *                          sequences, time-major) with time_steps=T, the recurrent state kept between calls
 *                          as Darknet keeps it; TRAIN=1 builds training buffers (cfg batch/subdivisions must give
 *                          N) and forwards with state.train=1 (no backward). Call k writes OUTDIR/k/out_i.f32
 *                          with l.outputs * N floats (a recurrent layer's l.batch is N/T) and OUTDIR/k/layers.txt
 *                          whose batch column is N.
 *
 * WEIGHTS may be "-" (Darknet's own initialization). INPUT holds float32 N x C x H x W, RGB 0..1, planar.
 * TRUTH holds, per image, an int32 count k then k x 6 float32 (x, y, w, h, class, track id; normalized).
 * Each layer i writes OUTDIR/out_i.f32 (l.outputs * l.batch floats), and in train mode delta_i.f32 and the
 * parameter updates (wupd_i, bupd_i, supd_i: the negative gradient summed over the batch, as Darknet keeps them);
 * OUTDIR/layers.txt has one line per layer: index type out_c out_h out_w outputs batch cost.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "darknet.h"
#include "network.h"
#include "parser.h"
#include "matrix.h"

/* k-means steps of src/matrix.c (not in its header). */
int kmeans_expectation(matrix data, int *assignments, matrix centers);
void kmeans_maximization(matrix data, int *assignments, matrix centers);
/* Augmentation steps of src/image.c and src/data.c (not all in the public header). */
image crop_image(image im, int dx, int dy, int w, int h);
void flip_image(image a);
void distort_image(image im, float hue, float sat, float val);
void blend_images(image new_img, float alpha, image old_img, float beta);
void blend_truth(float *new_truth, int boxes, int truth_size, float *old_truth);
int fill_truth_detection(const char *path, int num_boxes, int truth_size, float *truth, int classes, int flip,
                         float dx, float dy, float sx, float sy, int net_w, int net_h);

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "harness: %s %s\n", msg, arg ? arg : "");
    exit(2);
}

static float *read_floats(const char *path, size_t count) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    float *data = (float *)calloc(count ? count : 1, sizeof(float));
    size_t got = fread(data, sizeof(float), count, f);
    fclose(f);
    if (got != count) die("short input file", path);
    return data;
}

static void write_floats(const char *dir, const char *stem, int i, const float *data, size_t count) {
    if (!data || !count) return;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s_%d.f32", dir, stem, i);
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot write", path);
    fwrite(data, sizeof(float), count, f);
    fclose(f);
}

/* Truth buffer for one sub-batch: net.truths floats per image, zero padded (Darknet stops at w == 0). Per image
   the file holds a count k and k rows of 6 floats, or (k < 0) -k floats copied as they are. */
static float *read_truth(FILE *f, network *net, int batch) {
    int truths = 0, i;
    for (i = 0; i < net->n; ++i)
        if (net->layers[i].truths > truths) truths = net->layers[i].truths;
    if (!truths) truths = net->layers[net->n - 1].outputs;  /* [cost]: one truth per value it compares */
    float *y = (float *)calloc((size_t)batch * (truths ? truths : 1), sizeof(float));
    int b;
    for (b = 0; b < batch; ++b) {
        int k = 0;
        if (fread(&k, sizeof(int), 1, f) != 1) die("short truth file", "");
        if (k < 0) {  /* -k floats as the layer reads them ([detection]: its per-cell grid) */
            if (-k > truths) die("raw truth longer than the layer's truths", "");
            if (fread(y + (size_t)b * truths, sizeof(float), (size_t)-k, f) != (size_t)-k) die("short truth file", "");
            continue;
        }
        if (k * 6 > truths) die("too many boxes for the layer's max", "");
        if (k && fread(y + (size_t)b * truths, sizeof(float), (size_t)k * 6, f) != (size_t)k * 6)
            die("short truth file", "");
    }
    return y;
}

static void dump_layers(network *net, const char *dir, int train) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/layers.txt", dir);
    FILE *meta = fopen(path, "w");
    if (!meta) die("cannot write", path);
    int i;
    for (i = 0; i < net->n; ++i) {
        layer l = net->layers[i];
        size_t n = (size_t)l.outputs * l.batch;
        write_floats(dir, "out", i, l.output, n);
        if (train) {
            write_floats(dir, "delta", i, l.delta, n);
            write_floats(dir, "wupd", i, l.weight_updates, (size_t)l.nweights);
            write_floats(dir, "bupd", i, l.bias_updates, (size_t)l.nbiases);
            if (l.batch_normalize) write_floats(dir, "supd", i, l.scale_updates, (size_t)l.n);
        }
        fprintf(meta, "%d %s %d %d %d %d %d %.9g\n", i, get_layer_string(l.type), l.out_c, l.out_h, l.out_w,
                l.outputs, l.batch, l.cost ? l.cost[0] : 0.0f);
    }
    fclose(meta);
}

static network load(const char *cfg, const char *weights, int train) {
    /* batch 0 keeps the cfg's batch/subdivisions and allocates training buffers. */
    network net = parse_network_cfg_custom((char *)cfg, train ? 0 : 1, 0);
    if (strcmp(weights, "-") != 0) load_weights(&net, (char *)weights);
    return net;
}

/* Forward + backward over `subdivisions` sub-batches, read one after another from INPUT and TRUTH. */
static void train_all(network *net, const char *input_path, const char *truth_path) {
    size_t per = (size_t)net->batch * net->inputs;
    float *x = read_floats(input_path, per * net->subdivisions);
    FILE *tf = fopen(truth_path, "rb");
    if (!tf) die("cannot open", truth_path);
    int s;
    for (s = 0; s < net->subdivisions; ++s) {
        float *y = read_truth(tf, net, net->batch);
        train_network_datum(*net, x + per * s, y);
        free(y);
    }
    fclose(tf);
    free(x);
}

/* Every layer's whole output over the net's batch (recurrent layers keep l.batch = batch / time_steps). */
static void dump_sequence(network *net, const char *dir) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/layers.txt", dir);
    FILE *meta = fopen(path, "w");
    if (!meta) die("cannot write", path);
    int i;
    for (i = 0; i < net->n; ++i) {
        layer l = net->layers[i];
        write_floats(dir, "out", i, l.output, (size_t)l.outputs * net->batch);
        fprintf(meta, "%d %s %d %d %d %d %d 0\n", i, get_layer_string(l.type), l.out_c, l.out_h, l.out_w, l.outputs,
                net->batch);
    }
    fclose(meta);
}

static void run_sequence(char **argv) {
    int n = atoi(argv[4]), steps = atoi(argv[5]), calls = atoi(argv[6]), train = atoi(argv[7]);
    if (n < 1 || steps < 1 || n % steps || calls < 1) die("bad N/T/CALLS", argv[4]);
    /* batch 0 = training buffers, batch and time_steps taken from the cfg's [net] */
    network net = parse_network_cfg_custom(argv[2], train ? 0 : n, train ? 0 : steps);
    if (net.batch != n || net.time_steps != steps) die("the cfg's [net] batch/time_steps do not give N and T", "");
    if (strcmp(argv[3], "-") != 0) load_weights(&net, argv[3]);
    float *x = read_floats(argv[8], (size_t)calls * n * net.inputs);
    int k;
    for (k = 0; k < calls; ++k) {
        network_state state = {0};
        state.net = net;
        state.input = x + (size_t)k * n * net.inputs;
        state.train = train;
        forward_network(net, state);
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s/%d", argv[9], k);
        mkdir(dir, 0755);
        dump_sequence(&net, dir);
    }
    free(x);
}

/* The 'updates' mode: `rounds` Darknet training iterations on the same sub-batches, dumped as they go. */
static void train_rounds(network *net, const char *input_path, const char *truth_path, int rounds,
                         const char *dir) {
    size_t per = (size_t)net->batch * net->inputs;
    float *x = read_floats(input_path, per * net->subdivisions);
    char path[4096];
    int k, s;
    for (k = 0; k < rounds; ++k) {
        FILE *tf = fopen(truth_path, "rb");
        if (!tf) die("cannot open", truth_path);
        for (s = 0; s < net->subdivisions; ++s) {
            float *y = read_truth(tf, net, net->batch);
            train_network_datum(*net, x + per * s, y);
            free(y);
            snprintf(path, sizeof(path), "%s/%d_%d", dir, k, s);
            mkdir(path, 0755);
            dump_layers(net, path, 1);
        }
        fclose(tf);
        printf("rate %.9g\n", get_current_rate(*net));
        update_network(*net);
    }
    free(x);
    snprintf(path, sizeof(path), "%s/final.weights", dir);
    save_weights(*net, path);
}

int main(int argc, char **argv) {
    if (argc < 3) die("usage: harness forward|train|step|rate CFG ...", "");
    const char *mode = argv[1];
    if (strcmp(mode, "forward") == 0 && argc == 7) {
        int batch = atoi(argv[4]);
        if (batch < 1) die("bad batch", argv[4]);
        network net = parse_network_cfg_custom(argv[2], batch, 1);  /* batch > 0: inference buffers only */
        if (strcmp(argv[3], "-") != 0) load_weights(&net, argv[3]);
        float *x = read_floats(argv[5], (size_t)net.batch * net.inputs);
        network_predict(net, x);
        dump_layers(&net, argv[6], 0);
        return 0;
    }
    if (strcmp(mode, "train") == 0 && argc == 7) {
        network net = load(argv[2], argv[3], 1);
        train_all(&net, argv[4], argv[5]);
        dump_layers(&net, argv[6], 1);
        return 0;
    }
    if (strcmp(mode, "step") == 0 && argc == 7) {
        network net = load(argv[2], argv[3], 1);
        train_all(&net, argv[4], argv[5]);
        printf("rate %.9g\n", get_current_rate(net));
        update_network(net);
        save_weights(net, argv[6]);
        return 0;
    }
    if (strcmp(mode, "rate") == 0 && argc == 4) {
        network net = load(argv[2], "-", 1);
        int n = atoi(argv[3]), k;
        for (k = 0; k <= n; ++k) {
            *net.seen = (uint64_t)k * net.batch * net.subdivisions;
            printf("rate %.9g\n", get_current_rate(net));
        }
        return 0;
    }
    if (strcmp(mode, "layers") == 0 && argc == 3) {
        network net = parse_network_cfg_custom(argv[2], 1, 1);
        int i;
        for (i = 0; i < net.n; ++i) {
            layer l = net.layers[i];
            printf("%d %s %d %d %d %d %d 0 %.9g\n", i, get_layer_string(l.type), l.out_c, l.out_h, l.out_w,
                   l.outputs, l.batch, l.bflops);
        }
        return 0;
    }
    if (strcmp(mode, "sequence") == 0 && argc == 10) {
        run_sequence(argv);
        return 0;
    }
    if (strcmp(mode, "updates") == 0 && argc == 8) {
        network net = load(argv[2], argv[3], 1);
        int rounds = atoi(argv[6]);
        if (rounds < 1) die("bad number of rounds", argv[6]);
        train_rounds(&net, argv[4], argv[5], rounds, argv[7]);
        return 0;
    }
    if (strcmp(mode, "kmeans") == 0 && argc == 5) {
        /* As do_kmeans, with random_centers replaced by the given rows. */
        int k = atoi(argv[2]), i;
        FILE *f = fopen(argv[3], "rb");
        if (!f || k < 1) die("bad kmeans input", argv[3]);
        fseek(f, 0, SEEK_END);
        int n = (int)(ftell(f) / (2 * sizeof(float)));
        fclose(f);
        float *xy = read_floats(argv[3], (size_t)n * 2);
        int *init = (int *)read_floats(argv[4], (size_t)k);  /* int32 and float32 have the same size */
        matrix data = make_matrix(n, 2), centers = make_matrix(k, 2);
        for (i = 0; i < n; ++i) { data.vals[i][0] = xy[2 * i]; data.vals[i][1] = xy[2 * i + 1]; }
        for (i = 0; i < k; ++i) { centers.vals[i][0] = xy[2 * init[i]]; centers.vals[i][1] = xy[2 * init[i] + 1]; }
        int *assignments = (int *)calloc((size_t)n, sizeof(int));
        if (k == 1) kmeans_maximization(data, assignments, centers);
        for (i = 0; i < 1000 && !kmeans_expectation(data, assignments, centers); ++i)
            kmeans_maximization(data, assignments, centers);
        printf("iterations %d\n", i);
        for (i = 0; i < k; ++i) printf("center %.9g %.9g\n", centers.vals[i][0], centers.vals[i][1]);
        return 0;
    }
    if (strcmp(mode, "augment") == 0 && argc == 18) {
        /* The body of load_data_detection for one image, with its random draws given. */
        int w = atoi(argv[3]), h = atoi(argv[4]), net_w = atoi(argv[5]), net_h = atoi(argv[6]);
        int pleft = atoi(argv[7]), pright = atoi(argv[8]), ptop = atoi(argv[9]), pbot = atoi(argv[10]);
        int flip = atoi(argv[11]), max_boxes = atoi(argv[16]);
        float dhue = (float)atof(argv[12]), dsat = (float)atof(argv[13]), dexp = (float)atof(argv[14]);
        image orig = make_image(w, h, 3);
        float *pixels = read_floats(argv[2], (size_t)w * h * 3);
        memcpy(orig.data, pixels, sizeof(float) * w * h * 3);
        int swidth = w - pleft - pright, sheight = h - ptop - pbot;
        float sx = (float)swidth / w, sy = (float)sheight / h;
        image cropped = crop_image(orig, pleft, ptop, swidth, sheight);
        float dx = ((float)pleft / w) / sx, dy = ((float)ptop / h) / sy;
        image sized = resize_image(cropped, net_w, net_h);
        if (flip) flip_image(sized);
        distort_image(sized, dhue, dsat, dexp);
        write_floats(argv[17], "image", 0, sized.data, (size_t)net_w * net_h * 3);
        float *truth = (float *)calloc((size_t)max_boxes * 6, sizeof(float));
        fill_truth_detection(argv[15], max_boxes, 6, truth, 1 << 20, flip, dx, dy, 1. / sx, 1. / sy, net_w, net_h);
        write_floats(argv[17], "truth", 0, truth, (size_t)max_boxes * 6);
        return 0;
    }
    if (strcmp(mode, "mixup") == 0 && argc == 9) {
        int n = atoi(argv[2]), max_boxes = atoi(argv[7]);
        image new_img = make_image(n, 1, 1), old_img = make_image(n, 1, 1);
        float *a = read_floats(argv[3], (size_t)n), *b = read_floats(argv[4], (size_t)n);
        memcpy(new_img.data, a, sizeof(float) * n);
        memcpy(old_img.data, b, sizeof(float) * n);
        blend_images(new_img, 0.5, old_img, 0.5);
        write_floats(argv[8], "image", 0, new_img.data, (size_t)n);
        float *new_truth = read_floats(argv[5], (size_t)max_boxes * 6);
        float *old_truth = read_floats(argv[6], (size_t)max_boxes * 6);
        blend_truth(new_truth, max_boxes, 6, old_truth);
        write_floats(argv[8], "truth", 0, new_truth, (size_t)max_boxes * 6);
        return 0;
    }
    die("bad arguments for mode", mode);
    return 2;
}

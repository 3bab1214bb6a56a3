/* Darknet's default image decode (load_image_stb in Darknet's src/image.c, built without OpenCV): stb_image
   v2.30, the copy Darknet ships in 3rdparty/stb/include, compiled as Darknet compiles it (image.c defines
   STB_IMAGE_IMPLEMENTATION with stb's defaults: every format, SSE2 on x86-64). Loaded by yolo/files/stb_decode.py. */
#define STB_IMAGE_IMPLEMENTATION
#include "stb_image.h"

/* The image in `data` (`size` bytes) as stbi_load(filename, &w, &h, &c, 3) decodes it for load_image_color:
   RGB bytes, row after row (*w x *h x 3, to be released with yolo_stb_free), or NULL with *reason set. */
unsigned char *yolo_stb_decode(const unsigned char *data, int size, int *w, int *h, const char **reason)
{
    int c;
    unsigned char *pixels = stbi_load_from_memory(data, size, w, h, &c, 3);
    *reason = pixels ? 0 : stbi_failure_reason();
    return pixels;
}

void yolo_stb_free(unsigned char *pixels)
{
    stbi_image_free(pixels);
}

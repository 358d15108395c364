__global__ void k(float* x) { x[0] = 1.0f; }
int main() { return 0; }

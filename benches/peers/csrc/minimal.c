/*
 * Hand-written minimal-coordinate equations of motion in C (issue 15): what a Modelica tool's
 * FMU would run for the three benchmark mechanisms. Independent of the engine: written from
 * the models' physics (the same derivations as the scripts in tools/references), checked against the
 * references in benches/peers/data (src/minimal.rs tests).
 *
 * No allocation: the chain takes a caller-owned work array of n*n + n doubles.
 */
#include <math.h>

#define G 9.81

/* ---- Stiff double pendulum (paper 000 section 5.1; models/double_pendulum_stiff.toml) ----
 * y = (theta1, theta2, omega1, omega2), absolute bar angles about +z from +x.
 * Bars m1 = 3, L1 = 2, I1 = 1 (about the centre, a1 = 1); m2 = 0.3, L2 = 3, I2 = 0.225
 * (a2 = 1.5). Springs: ground-bar 1 k1 = 400, c1 = 15, free angle 3 pi/2 on theta1, whose
 * deviation starts at wrap(0 - 3 pi/2) = pi/2: d1 = theta1 + pi/2; bar 1-bar 2 k2 = 3e5,
 * c2 = 5e4, free angle 0 on theta2 - theta1 = 23 pi/12 at t = 0, deviation -pi/12:
 * d2 = theta2 - theta1 - 2 pi. Lagrange's equations, 2 x 2 solve by Cramer's rule. */
void mbs_dp_rhs(double t, const double *y, double *yd)
{
    (void)t;
    const double m1 = 3.0, l1 = 2.0, a1 = 1.0, i1 = 1.0;
    const double m2 = 0.3, a2 = 1.5, i2 = 0.225;
    const double k1 = 400.0, c1 = 15.0, k2 = 3e5, c2 = 5e4;
    const double pi = 3.14159265358979323846;
    double th1 = y[0], th2 = y[1], w1 = y[2], w2 = y[3];
    double tau1 = -k1 * (th1 + 0.5 * pi) - c1 * w1;
    double tau2 = -k2 * (th2 - th1 - 2.0 * pi) - c2 * (w2 - w1);
    double p = m2 * l1 * a2;
    double s = sin(th1 - th2), c = cos(th1 - th2);
    double m11 = i1 + m1 * a1 * a1 + m2 * l1 * l1, m22 = i2 + m2 * a2 * a2, m12 = p * c;
    double f1 = -p * s * w2 * w2 - (m1 * a1 + m2 * l1) * G * cos(th1) + tau1 - tau2;
    double f2 = p * s * w1 * w1 - m2 * a2 * G * cos(th2) + tau2;
    double det = m11 * m22 - m12 * m12;
    yd[0] = w1;
    yd[1] = w2;
    yd[2] = (m22 * f1 - m12 * f2) / det;
    yd[3] = (m11 * f2 - m12 * f1) / det;
}

/* ---- Pendulum chain (paper 003 section 4.2.1; models/pendulum_chain.toml physics) ----
 * n particles of 1 kg on massless 1 m rods from a moving suspension point whose acceleration
 * (sxdd, sydd) is an input. y = (phi_1..phi_n, dphi_1..dphi_n), absolute rod angles from -y,
 * counter-clockwise. Lagrange (C_jk = n - max(j, k), the mass beyond rod max(j, k)):
 *   sum_k C_jk [cos(phi_j - phi_k) phi''_k + sin(phi_j - phi_k) phi'_k^2]
 *       = -C_jj [g sin phi_j + cos phi_j sxdd + sin phi_j sydd]
 * M is symmetric positive definite: dense Cholesky, as a tool's generated code would solve
 * the linear system it cannot tear. work: n*n + n doubles (M, then sin/cos reuse). */
void mbs_chain_rhs(int n, double t, const double *y, double *yd, double sxdd, double sydd,
                   double *work)
{
    (void)t;
    const double *phi = y, *dphi = y + n;
    double *m = work;          /* n x n, lower triangle used */
    double *b = yd + n;        /* right-hand side, solved in place */
    double *sn = work + n * n; /* sin phi; cos phi goes into yd[0..n) until the end */
    double *cs = yd;
    for (int j = 0; j < n; j++) {
        sn[j] = sin(phi[j]);
        cs[j] = cos(phi[j]);
    }
    for (int j = 0; j < n; j++) {
        double acc = -(double)(n - j) * (G * sn[j] + cs[j] * sxdd + sn[j] * sydd);
        for (int k = 0; k < n; k++) {
            double cjk = (double)(n - (j > k ? j : k));
            /* sin(phi_j - phi_k) */
            acc -= cjk * (sn[j] * cs[k] - cs[j] * sn[k]) * dphi[k] * dphi[k];
            if (k <= j)
                m[j * n + k] = cjk * (cs[j] * cs[k] + sn[j] * sn[k]);
        }
        b[j] = acc;
    }
    /* Cholesky M = L L^T in place (lower triangle). */
    for (int j = 0; j < n; j++) {
        double d = m[j * n + j];
        for (int k = 0; k < j; k++)
            d -= m[j * n + k] * m[j * n + k];
        d = sqrt(d);
        m[j * n + j] = d;
        for (int i = j + 1; i < n; i++) {
            double s = m[i * n + j];
            for (int k = 0; k < j; k++)
                s -= m[i * n + k] * m[j * n + k];
            m[i * n + j] = s / d;
        }
    }
    /* L z = b, then L^T x = z. */
    for (int i = 0; i < n; i++) {
        double s = b[i];
        for (int k = 0; k < i; k++)
            s -= m[i * n + k] * b[k];
        b[i] = s / m[i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        double s = b[i];
        for (int k = i + 1; k < n; k++)
            s -= m[k * n + i] * b[k];
        b[i] = s / m[i * n + i];
    }
    for (int j = 0; j < n; j++)
        yd[j] = dphi[j];
}

/* ---- Slider-crank (paper 004; models/slider_crank.toml, mu = 0) ----
 * One coordinate, the crank angle th from +x (crank a = 0.1, rod b = 0.3, slider on the x
 * axis); with th prescribed (the model's crank_angle input) the mechanism has no degree of
 * freedom left and the minimal-coordinate model is its inverse dynamics: the crank torque
 * tau = m(th) th'' + b(th, th') by virtual work in th (crank 0.12 kg, Izz 1e-4, centre a/2;
 * rod 0.5 kg, Izz 4e-3, centre mid-length; slider 2 kg), and the slider position x. */
void mbs_slider_crank(double th, double dth, double ddth, double *torque, double *x_out)
{
    const double a = 0.1, bl = 0.3, m1 = 0.12, i1 = 1e-4, m2 = 0.5, i2 = 4e-3, m3 = 2.0;
    double st = sin(th), ct = cos(th);
    double sb = -a * st / bl, cb = sqrt(1.0 - sb * sb);
    double x = a * ct + bl * cb;
    double dbeta = -a * ct * dth / (bl * cb);
    double ddbeta = (-a * ct * ddth + a * st * dth * dth + bl * sb * dbeta * dbeta) / (bl * cb);
    double ddx = -a * ct * dth * dth - a * st * ddth - bl * cb * dbeta * dbeta - bl * sb * ddbeta;
    /* crank tip A and its acceleration; centres G1 = A/2, G2 = (A + B)/2 */
    double aax = a * (-ddth * st - dth * dth * ct), aay = a * (ddth * ct - dth * dth * st);
    double g1x = 0.5 * aax, g1y = 0.5 * aay;
    double g2x = 0.5 * (aax + ddx), g2y = 0.5 * aay;
    /* velocity coefficients d/dth */
    double dbeta_dth = -a * ct / (bl * cb);
    double dx_dth = -a * st - bl * sb * dbeta_dth;
    double j1x = -0.5 * a * st, j1y = 0.5 * a * ct;
    double j2x = 0.5 * (-a * st + dx_dth), j2y = 0.5 * a * ct;
    *torque = m1 * (g1x * j1x + (g1y + G) * j1y) + m2 * (g2x * j2x + (g2y + G) * j2y) + i1 * ddth
              + i2 * ddbeta * dbeta_dth + m3 * ddx * dx_dth;
    *x_out = x;
}

"""The benchmark problems built in Exudyn's own terms (issue 7).

Planar models with Exudyn's 2-D items: ObjectRigidBody2D / MassPoint2D bodies,
ObjectJointRevolute2D joints, ObjectConnectorDistance rods, ObjectConnectorCoordinateSpringDamper
for the rotational spring-dampers (on the bodies' rotation coordinates), and
ObjectConnectorCoordinate with an offset user function for prescribed motions (suspension,
crank angle). Each builder returns (mbs, sensors): sensors record the compared quantities.
"""

import math

import exudyn as exu
from exudyn.itemInterface import (
    LoadMassProportional,
    MarkerBodyMass,
    MarkerBodyPosition,
    MarkerNodeCoordinate,
    MarkerNodePosition,
    MassPoint2D,
    NodePoint2D,
    NodePointGround,
    NodeRigidBody2D,
    ObjectConnectorCoordinate,
    ObjectConnectorCoordinateSpringDamper,
    ObjectConnectorDistance,
    ObjectGround,
    ObjectJointRevolute2D,
    ObjectRigidBody2D,
    SensorNode,
    SensorObject,
)

G = 9.81


def _gravity(mbs, body):
    m = mbs.AddMarker(MarkerBodyMass(bodyNumber=body))
    mbs.AddLoad(LoadMassProportional(markerNumber=m, loadVector=[0, -G, 0]))


def _ground_coordinate(mbs):
    n = mbs.AddNode(NodePointGround(referenceCoordinates=[0, 0, 0]))
    return mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=n, coordinate=0))


def double_pendulum(sc):
    """Paper 000 section 5.1: bar 1 (L 2, m 3) from the origin along +x, bar 2 (L 3, m 0.3) from
    (2, 0) at 23 pi/12 spinning at 10 rad/s; slender-bar inertias m L^2/12.
    Exudyn's node coordinates are displacements from the reference configuration (theta1 from
    0, theta2 from 23 pi/12). Spring 1 acts on theta1 with deviation theta1 - 3pi/2 taken in
    (-pi, pi] at t = 0, i.e. theta1 + pi/2: offset -pi/2. Spring 2 on theta2 - theta1, whose
    deviation is -pi/12 at the start where the displacement difference is 0: offset pi/12."""
    mbs = sc.AddSystem()
    og = mbs.AddObject(ObjectGround(referencePosition=[0, 0, 0]))
    m1, l1, m2, l2 = 3.0, 2.0, 0.3, 3.0
    th2 = 23 * math.pi / 12
    c2 = [l1 + 0.5 * l2 * math.cos(th2), 0.5 * l2 * math.sin(th2)]
    v2 = [-10 * 0.5 * l2 * math.sin(th2), 10 * 0.5 * l2 * math.cos(th2)]
    n1 = mbs.AddNode(NodeRigidBody2D(referenceCoordinates=[1.0, 0.0, 0.0], initialVelocities=[0, 0, 0]))
    b1 = mbs.AddObject(ObjectRigidBody2D(physicsMass=m1, physicsInertia=m1 * l1**2 / 12, nodeNumber=n1))
    n2 = mbs.AddNode(NodeRigidBody2D(referenceCoordinates=[c2[0], c2[1], th2], initialVelocities=[v2[0], v2[1], 10.0]))
    b2 = mbs.AddObject(ObjectRigidBody2D(physicsMass=m2, physicsInertia=m2 * l2**2 / 12, nodeNumber=n2))
    mg = mbs.AddMarker(MarkerBodyPosition(bodyNumber=og, localPosition=[0, 0, 0]))
    m1a = mbs.AddMarker(MarkerBodyPosition(bodyNumber=b1, localPosition=[-1.0, 0, 0]))
    m1b = mbs.AddMarker(MarkerBodyPosition(bodyNumber=b1, localPosition=[1.0, 0, 0]))
    m2a = mbs.AddMarker(MarkerBodyPosition(bodyNumber=b2, localPosition=[-1.5, 0, 0]))
    mbs.AddObject(ObjectJointRevolute2D(markerNumbers=[mg, m1a]))
    mbs.AddObject(ObjectJointRevolute2D(markerNumbers=[m1b, m2a]))
    mgc = _ground_coordinate(mbs)
    t1 = mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=n1, coordinate=2))
    t2 = mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=n2, coordinate=2))
    mbs.AddObject(ObjectConnectorCoordinateSpringDamper(markerNumbers=[mgc, t1], stiffness=400.0, damping=15.0, offset=-math.pi / 2))
    mbs.AddObject(ObjectConnectorCoordinateSpringDamper(markerNumbers=[t1, t2], stiffness=3e5, damping=5e4, offset=math.pi / 12))
    _gravity(mbs, b1)
    _gravity(mbs, b2)
    s = mbs.AddSensor(SensorNode(nodeNumber=n1, storeInternal=True, outputVariableType=exu.OutputVariableType.Coordinates))
    return mbs, {"theta1": (s, 2)}


W = 2 * math.pi * 0.05


# Displacements of the suspension node from its reference position (2, 0).
def _susp_x(mbs, t, itemNumber, lOffset):
    return 0.3 * math.sin(W * t)


def _susp_y(mbs, t, itemNumber, lOffset):
    return 0.2 * math.sin(W * t)


# Time derivatives: the index-2 solvers (TrapezoidalIndex2, useIndex2Constraints) use them.
def _susp_x_t(mbs, t, itemNumber, lOffset):
    return 0.3 * W * math.cos(W * t)


def _susp_y_t(mbs, t, itemNumber, lOffset):
    return 0.2 * W * math.cos(W * t)


def chain(sc, n):
    """Paper 003: n mass points of 1 kg joined by 1 m rods (ObjectConnectorDistance), the first
    to a suspension point whose coordinates follow (2 + 0.3 sin wt, 0.2 sin wt), w = 2 pi 0.05
    (a massless-in-effect point node driven by coordinate constraints with offset user
    functions). Initially hanging straight down, translating with the suspension velocity
    (the references' "rigid" start)."""
    mbs = sc.AddSystem()
    vs = [0.3 * W, 0.2 * W]
    mgc = _ground_coordinate(mbs)
    ns = mbs.AddNode(NodePoint2D(referenceCoordinates=[2.0, 0.0], initialVelocities=vs))
    # A small mass keeps the suspension node's mass matrix regular; its motion is prescribed.
    mbs.AddObject(MassPoint2D(physicsMass=1e-3, nodeNumber=ns))
    for k, uf, uf_t in ((0, _susp_x, _susp_x_t), (1, _susp_y, _susp_y_t)):
        mc = mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=ns, coordinate=k))
        mbs.AddObject(ObjectConnectorCoordinate(markerNumbers=[mgc, mc], offsetUserFunction=uf, offsetUserFunction_t=uf_t))
    prev = mbs.AddMarker(MarkerNodePosition(nodeNumber=ns))
    sensors = {}
    for k in range(n):
        nk = mbs.AddNode(NodePoint2D(referenceCoordinates=[2.0, -(k + 1.0)], initialVelocities=vs))
        bk = mbs.AddObject(MassPoint2D(physicsMass=1.0, nodeNumber=nk))
        mk = mbs.AddMarker(MarkerNodePosition(nodeNumber=nk))
        mbs.AddObject(ObjectConnectorDistance(markerNumbers=[prev, mk], distance=1.0))
        _gravity(mbs, bk)
        prev = mk
        sensors[f"p{k}"] = mbs.AddSensor(SensorNode(nodeNumber=nk, storeInternal=True, outputVariableType=exu.OutputVariableType.Position))
    return mbs, sensors


def _crank_angle(mbs, t, itemNumber, lOffset):
    return 2 * math.pi * t


def _crank_rate(mbs, t, itemNumber, lOffset):
    return 2 * math.pi


def slider_crank(sc):
    """Paper 004: crank (0.1 m, 0.12 kg, Izz 1e-4) on ground at the origin, rod (0.3 m, 0.5 kg,
    Izz 4e-3), slider 2 kg as a point mass whose y is held at 0 (the prismatic joint; it cannot
    rotate, so its inertia does not enter). Crank angle 2 pi t by a coordinate constraint on the
    crank's rotation coordinate with an offset user function; the torque the drive applies to the crank
    is minus the constraint's force (Exudyn reports the reaction)."""
    mbs = sc.AddSystem()
    og = mbs.AddObject(ObjectGround(referencePosition=[0, 0, 0]))
    w = 2 * math.pi
    # Initial velocities consistent with crank rate 2 pi at angle 0 (slider at rest, rod
    # rotating at -w/3 about its crank-pin end: the pin moves at (0, 0.1 w)).
    nc = mbs.AddNode(NodeRigidBody2D(referenceCoordinates=[0.05, 0, 0], initialVelocities=[0, 0.05 * w, w]))
    bc = mbs.AddObject(ObjectRigidBody2D(physicsMass=0.12, physicsInertia=1e-4, nodeNumber=nc))
    wr = -0.1 * w / 0.3
    nr = mbs.AddNode(NodeRigidBody2D(referenceCoordinates=[0.25, 0, 0], initialVelocities=[0, 0.1 * w + wr * 0.15, wr]))
    br = mbs.AddObject(ObjectRigidBody2D(physicsMass=0.5, physicsInertia=4e-3, nodeNumber=nr))
    ns = mbs.AddNode(NodePoint2D(referenceCoordinates=[0.4, 0], initialVelocities=[0, 0]))
    bs = mbs.AddObject(MassPoint2D(physicsMass=2.0, nodeNumber=ns))
    mg = mbs.AddMarker(MarkerBodyPosition(bodyNumber=og, localPosition=[0, 0, 0]))
    mca = mbs.AddMarker(MarkerBodyPosition(bodyNumber=bc, localPosition=[-0.05, 0, 0]))
    mcb = mbs.AddMarker(MarkerBodyPosition(bodyNumber=bc, localPosition=[0.05, 0, 0]))
    mra = mbs.AddMarker(MarkerBodyPosition(bodyNumber=br, localPosition=[-0.15, 0, 0]))
    mrb = mbs.AddMarker(MarkerBodyPosition(bodyNumber=br, localPosition=[0.15, 0, 0]))
    msl = mbs.AddMarker(MarkerNodePosition(nodeNumber=ns))
    mbs.AddObject(ObjectJointRevolute2D(markerNumbers=[mg, mca]))
    mbs.AddObject(ObjectJointRevolute2D(markerNumbers=[mcb, mra]))
    mbs.AddObject(ObjectJointRevolute2D(markerNumbers=[mrb, msl]))
    mgc = _ground_coordinate(mbs)
    msy = mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=ns, coordinate=1))
    mbs.AddObject(ObjectConnectorCoordinate(markerNumbers=[mgc, msy]))
    mct = mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=nc, coordinate=2))
    drive = mbs.AddObject(ObjectConnectorCoordinate(markerNumbers=[mgc, mct], offsetUserFunction=_crank_angle, offsetUserFunction_t=_crank_rate))
    for b in (bc, br, bs):
        _gravity(mbs, b)
    s = mbs.AddSensor(SensorObject(objectNumber=drive, storeInternal=True, outputVariableType=exu.OutputVariableType.Force))
    return mbs, {"crank_torque": (s, 0)}
